"""What the capability track refuses, as exceptions whose message says why and what to do."""

from __future__ import annotations


class TrackError(Exception):
    """A request the track cannot serve (unknown build, judge, missing runs); the message says why."""


class RunRefused(TrackError):
    """A run refused before its first call: another run holds its lease, or it would break a bound."""


class RunBoundExceeded(TrackError):
    """A run stopped by a bound (bounds.run_deadline_s): recorded as failed, its partition not written."""
