"""Backends that turn (messages, sampling parameters) into a stream of events."""

from webui.engine.base import Backend, Slots, collect

__all__ = ["Backend", "Slots", "collect"]
