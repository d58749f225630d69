"""What the offline live model hears: where the user's utterances begin and end, and the
phrase it takes each one for.

Audio input (`audio/pcm;rate=N` blobs, PCM16 LE mono) is not recognised; the
model "hears" a fixed phrase chosen by the length of the utterance:
`SHORT_UTTERANCE_PHRASE` below `LONG_UTTERANCE_SECONDS`, otherwise
`LONG_UTTERANCE_PHRASE` (a weather question, so voice exercises a tool call).
An utterance ends:

* at `ActivityEnd`, once the client has sent `ActivityStart` (or from the start
  when `realtime_input_config` disables automatic activity detection); any
  audio between start and end counts as speech;
* otherwise by an energy detector: audio chunks whose RMS reaches
  `VOICE_RMS_THRESHOLD` are speech; the utterance ends after
  `END_OF_SPEECH_SILENCE_SECONDS` of quieter audio (counted in samples, so it
  does not depend on timing), at `audio_stream_end`, or when no audio arrives
  for `IDLE_END_OF_SPEECH_SECONDS` of wall time (a client that simply stops
  streaming). Silence alone is never an utterance.
"""

from __future__ import annotations

from .audio import rms

SHORT_UTTERANCE_PHRASE = "Hello from the microphone."
LONG_UTTERANCE_PHRASE = "What's the weather in Tokyo?"
LONG_UTTERANCE_SECONDS = 1.0

VOICE_RMS_THRESHOLD = 500.0  # About -36 dBFS: above room noise, below any speech.
END_OF_SPEECH_SILENCE_SECONDS = 0.5
IDLE_END_OF_SPEECH_SECONDS = 0.8


def phrase_for_utterance(seconds: float) -> str:
    """The words the offline model "hears" in an utterance of this length."""
    return LONG_UTTERANCE_PHRASE if seconds >= LONG_UTTERANCE_SECONDS else SHORT_UTTERANCE_PHRASE


class Listener:
    """Decides where the user's utterances begin and end."""

    def __init__(self, automatic: bool) -> None:
        self.explicit = not automatic
        self._in_activity = False
        self._speech = 0.0  # Seconds of speech in the current utterance.
        self._silence = 0.0  # Trailing quiet seconds (automatic detection only).

    @property
    def hearing(self) -> bool:
        """Whether an utterance is under way."""
        return self._speech > 0

    def activity_start(self) -> None:
        # Activity signals mean the client runs its own detection from now on.
        self.explicit = True
        self._in_activity = True
        self._speech = self._silence = 0.0

    def activity_end(self) -> float | None:
        """The length of the utterance the client's ActivityEnd closes, if any."""
        if not self._in_activity:
            return None
        self._in_activity = False
        return self._finish()

    def audio(self, data: bytes, rate: int) -> tuple[bool, float | None]:
        """Returns (speech just started, length of an utterance that just ended)."""
        seconds = len(data) / 2 / rate
        if self.explicit:
            if self._in_activity:
                self._speech += seconds
            return False, None
        if rms(data) >= VOICE_RMS_THRESHOLD:
            started = not self.hearing
            self._speech += self._silence + seconds  # Pauses inside speech count as speech.
            self._silence = 0.0
            return started, None
        if not self.hearing:
            return False, None
        self._silence += seconds
        if self._silence >= END_OF_SPEECH_SILENCE_SECONDS:
            return False, self._finish()
        return False, None

    def stream_end(self) -> float | None:
        """The client stopped streaming (audio_stream_end, or nothing arrives any more)."""
        if self.explicit or not self.hearing:
            return None
        return self._finish()

    def _finish(self) -> float | None:
        seconds = self._speech
        self._speech = self._silence = 0.0
        return seconds if seconds > 0 else None
