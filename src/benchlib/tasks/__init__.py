"""Learning tasks: classification, segmentation, regression (one module each, see :mod:`.base`)."""

from benchlib.tasks.base import Task, get_task

__all__ = ["Task", "get_task"]
