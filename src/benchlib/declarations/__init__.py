"""Declarations: how a parameter, a registry and a plugin are declared, and the declarations of
a dataset's sections and of the malfunctions (the methods, models, tasks and dataset sources
declare theirs beside their implementations), all torch-free."""
