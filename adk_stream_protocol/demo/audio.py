"""PCM16 audio of the offline live model: reading the user's audio and synthesising its
voice (a sine tone). The wire format is little-endian mono PCM16, `audio/pcm;rate=N`."""

from __future__ import annotations

import array
import math
import re
import sys

# The voice: a tone, 0.1 s of it per output transcription delta.
OUTPUT_SAMPLE_RATE = 24_000
OUTPUT_AUDIO_MIME_TYPE = f"audio/pcm;rate={OUTPUT_SAMPLE_RATE}"
AUDIO_SECONDS_PER_DELTA = 0.1
TONE_HZ = 440.0
TONE_AMPLITUDE = 6_000  # Quiet enough not to startle anyone testing with speakers on.

# The rate of input audio whose MIME type names none (Gemini Live's input rate).
DEFAULT_INPUT_SAMPLE_RATE = 16_000
# The voice detector's RMS reads at most this many samples of a chunk, evenly spread: a
# close loudness estimate at a cost that does not grow with the chunk (16,000 = 1 s).
MAX_RMS_SAMPLES = 16_000

_RE_RATE = re.compile(r"rate=(\d+)")


def _pcm16(data: bytes) -> array.array[int]:
    samples = array.array("h")
    samples.frombytes(data[: len(data) - len(data) % 2])
    if sys.byteorder == "big":  # The wire format is little-endian.
        samples.byteswap()
    return samples


def rms(data: bytes) -> float:
    """The loudness of PCM16 audio: the root mean square of its samples."""
    samples = _pcm16(data)
    if len(samples) > MAX_RMS_SAMPLES:
        samples = samples[:: -(-len(samples) // MAX_RMS_SAMPLES)]
    if not samples:
        return 0.0
    return math.sqrt(sum(s * s for s in samples) / len(samples))


def sample_rate(mime_type: str | None) -> int:
    """The sample rate a MIME type names (`audio/pcm;rate=N`), else the default."""
    match = _RE_RATE.search(mime_type or "")
    return int(match.group(1)) if match else DEFAULT_INPUT_SAMPLE_RATE


def _tone(first_sample: int, count: int) -> bytes:
    """A slice of one continuous sine tone, so consecutive chunks join smoothly."""
    step = 2 * math.pi * TONE_HZ / OUTPUT_SAMPLE_RATE
    samples = array.array(
        "h",
        (
            round(TONE_AMPLITUDE * math.sin(step * n))
            for n in range(first_sample, first_sample + count)
        ),
    )
    if sys.byteorder == "big":
        samples.byteswap()
    return samples.tobytes()


def voice_chunk(index: int) -> bytes:
    """The model's voice for its index-th output transcription delta."""
    samples = round(AUDIO_SECONDS_PER_DELTA * OUTPUT_SAMPLE_RATE)
    return _tone(index * samples, samples)
