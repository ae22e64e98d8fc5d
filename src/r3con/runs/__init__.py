"""Runs you can hold: start one (`start`, `resume`, or `prepare` then `begin`), follow its events, cancel it,
await its result; or `ask` for the answer in one blocking call."""

from ..pipeline.events import Event
from ..pipeline.planned import Plan
from ._ask import ask
from ._prepare import Prepared, ReadOptions, prepare, prepare_resume
from ._run import Run, begin, message, resume, start

__all__ = ["Event", "Plan", "Prepared", "ReadOptions", "Run", "ask", "begin", "message", "prepare",
           "prepare_resume", "resume", "start"]
