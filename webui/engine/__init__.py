"""Backends that turn (messages, sampling parameters) into a stream of events."""

from webui.engine.base import Backend, ClosingStream, Slots, collect

__all__ = ["Backend", "ClosingStream", "Slots", "collect"]
