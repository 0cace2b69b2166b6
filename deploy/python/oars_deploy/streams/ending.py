"""How a stream ended before its end: a truncated or damaged file, or a decoding error (torch-free).

Why: a video file whose container declares 64 frames but holds 20 (a copy cut short, a download that stopped) is
decoded without any FFmpeg error: the reader simply runs out of packets. Predicted as it was, it looked like a
complete 20-frame video. Every stream mode (per-frame prediction, ``--track``, ``--window``) asks the reader for a
:class:`StreamEnd` when it ran to the end and treats one as a listed failure, the way unreadable images are
(:mod:`oars_deploy.failures`): what was predicted is written, the last record carries :meth:`StreamEnd.to_json`,
the summary line says what is missing, and ``oars-infer`` exits with status 2. The training readers treat the same
files as bad samples (``on_bad_sample``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from oars_deploy.failures import Failures
from oars_deploy.records import ResultRecord


@dataclass(frozen=True)
class StreamEnd:
    """A stream that stopped before its end.

    Attributes:
        location: the stream as ``-i`` named it (file, URL or camera device).
        frames_read: the frames decoded (every frame, predicted or not).
        declared_frames: the frame count the container's header declares (None: it declares none, or a live
            source).
        error: the decoding error that stopped it (``'InvalidDataError: ...'``), or None when the file simply ran
            out of data before ``declared_frames``.
    """

    location: str
    frames_read: int
    declared_frames: int | None
    error: str | None = None

    def reason(self) -> str:
        """What happened, without the stream's name (the failure list puts the name in front)."""
        if self.declared_frames is None:
            return f"decoding stopped after {self.frames_read} frames: {self.error}"
        why = "" if self.error is None else f" (decoding error {self.error})"
        return (f"ended after {self.frames_read} of the {self.declared_frames} frames its header declares{why}: the "
                "file is truncated or damaged")

    def message(self) -> str:
        """The one sentence printed with the run's summary: ``'cut.mp4 ended after 20 of the 64 frames its header
        declares: the file is truncated or damaged'``."""
        return f"{self.location} {self.reason()}" if self.declared_frames is not None else \
            f"{self.location}: {self.reason()}"

    def to_json(self) -> dict:
        """The fields the stream's last record carries: ``declared_frames`` (int or None), ``frames_read``,
        ``truncated: true`` and, after a decoding error, ``stream_error``."""
        out: dict = {"declared_frames": self.declared_frames, "frames_read": int(self.frames_read),
                     "truncated": True}
        if self.error is not None:
            out["stream_error"] = self.error
        return out


def stream_failures(end: StreamEnd | None) -> Failures:
    """The run's failures: the stream listed with :meth:`StreamEnd.reason` when it ended early, else none.

    ``oars-infer`` raises their summary after writing the records (exit status 2), with ``total`` 1 (one stream):
    ``'1 of 1 streams were not read to the end:'`` then ``'  - cut.mp4: ended after 20 of the 64 frames ...'``.
    """
    failures = Failures(what="streams", verb="were not read to the end")
    if end is not None:
        failures.add(end.location, end.reason())
    return failures


def mark_last_record(records: list, end: StreamEnd | None) -> None:
    """Give the last record ``stream_end`` (:meth:`StreamEnd.to_json`, merged into its JSON) when the stream
    ended early; nothing when it did not or when no record was made (the failure list still names it).

    Args:
        records: the stream's records (:class:`~oars_deploy.streams.run.StreamFrameRecord` or
            :class:`~oars_deploy.streams.windows.ClipWindowRecord`, dataclasses with a ``stream_end`` field),
            replaced in place.
        end: how the stream ended early, or None.
    """
    if end is not None and records:
        last: ResultRecord = records[-1]
        records[-1] = replace(last, stream_end=end.to_json())  # type: ignore[type-var]
