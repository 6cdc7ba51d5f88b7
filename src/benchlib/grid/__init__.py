"""The grid: a cell and its spec, the grid axes and readings a config varies, the plugins a cell
uses, and the papers' own grids and claims."""
