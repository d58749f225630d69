"""What the offline live model takes from `llm_request.live_connect_config`."""

from __future__ import annotations

from dataclasses import dataclass

from google.genai import types


@dataclass(frozen=True)
class LiveOptions:
    """The parts of the live connect config the offline model honours.

    Built directly (tests), the defaults are text output with transcriptions on.
    """

    audio_output: bool = False
    input_transcription: bool = True
    output_transcription: bool = True
    automatic_activity_detection: bool = True

    @classmethod
    def from_config(cls, config: types.LiveConnectConfig | None) -> LiveOptions:
        """The options a connect config asks for (`run_live` fills it from `RunConfig`)."""
        config = config or types.LiveConnectConfig()
        modalities = config.response_modalities
        # run_live always sets the modalities; AUDIO is its default too.
        audio = modalities is None or types.Modality.AUDIO in modalities
        realtime = config.realtime_input_config
        detection = realtime.automatic_activity_detection if realtime else None
        return cls(
            audio_output=audio,
            input_transcription=config.input_audio_transcription is not None,
            output_transcription=config.output_audio_transcription is not None,
            automatic_activity_detection=not (detection and detection.disabled),
        )
