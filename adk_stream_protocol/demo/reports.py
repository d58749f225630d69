"""What the demo shows of tools that reach the page: ``draw_chart`` reports its progress with
data parts and saves its chart as an artifact; ``GROUNDING`` is what the offline model attaches
to an answer "with sources", as Gemini does when it searches.
"""

from __future__ import annotations

from typing import Any

from google.adk.tools.tool_context import ToolContext
from google.genai import types

from adk_stream_protocol.plugins.tool_ui import send_data

CHART_FILENAME = "temperatures.svg"
# The cities the offline weather knows, with their temperatures (°C).
_BARS = (("Tokyo", 18), ("San Francisco", 15), ("London", 12), ("New York", 22))

GROUNDED_ANSWER = (
    "Tokyo is the capital of Japan. It has about 14 million people."
    " The demo's weather table lists it at 18°C."
)
GROUNDING = types.GroundingMetadata(
    grounding_chunks=[
        types.GroundingChunk(
            web=types.GroundingChunkWeb(uri="https://example.org/tokyo", title="Tokyo")
        ),
        types.GroundingChunk(web=types.GroundingChunkWeb(uri="https://example.org/census")),
        types.GroundingChunk(
            retrieved_context=types.GroundingChunkRetrievedContext(
                document_name="corpora/demo/documents/weather-table.csv",
                title="Demo weather table",
            )
        ),
    ],
    grounding_supports=[
        types.GroundingSupport(
            segment=types.Segment(text="Tokyo is the capital of Japan."),
            grounding_chunk_indices=[0],
        ),
        types.GroundingSupport(
            segment=types.Segment(text="It has about 14 million people."),
            grounding_chunk_indices=[0, 1],
        ),
        types.GroundingSupport(
            segment=types.Segment(text="The demo's weather table lists it at 18°C."),
            grounding_chunk_indices=[2],
        ),
    ],
)


async def draw_chart(tool_context: ToolContext) -> dict[str, Any]:
    """Draws a bar chart of the temperatures in the cities the demo knows and saves it as an
    SVG file the user can see in the chat.

    Returns:
        The chart's filename, its version and how many bars it has.
    """
    progress_id = f"chart-{tool_context.function_call_id}"
    steps = ("reading temperatures", "drawing bars", "saving the chart")
    for index, label in enumerate(steps):
        # One part, replaced in place at every step (same name and id).
        await send_data(
            tool_context,
            "progress",
            {"label": label, "step": index + 1, "of": len(steps)},
            id=progress_id,
        )
    svg = _chart_svg().encode()
    version = await tool_context.save_artifact(
        CHART_FILENAME, types.Part.from_bytes(data=svg, mime_type="image/svg+xml")
    )
    await send_data(
        tool_context,
        "progress",
        {"label": "done", "step": len(steps), "of": len(steps)},
        id=progress_id,
    )
    # Only for the page's onData: a notice, kept in no message.
    await send_data(tool_context, "notice", {"text": f"Saved {CHART_FILENAME}"}, transient=True)
    return {"filename": CHART_FILENAME, "version": version, "bars": len(_BARS)}


def _chart_svg() -> str:
    width, bar, gap, scale = 320, 56, 20, 6
    height = max(t for _, t in _BARS) * scale + 40
    shapes = []
    for index, (city, temperature) in enumerate(_BARS):
        x = gap + index * (bar + gap)
        top = height - 20 - temperature * scale
        shapes.append(
            f'<rect x="{x}" y="{top}" width="{bar}" height="{temperature * scale}" fill="#4a7"/>'
            f'<text x="{x + bar / 2}" y="{height - 6}" font-size="10" text-anchor="middle">'
            f"{city}</text>"
            f'<text x="{x + bar / 2}" y="{top - 4}" font-size="10" text-anchor="middle">'
            f"{temperature}°C</text>"
        )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width + gap}" height="{height}"'
        f' viewBox="0 0 {width + gap} {height}">{"".join(shapes)}</svg>'
    )
