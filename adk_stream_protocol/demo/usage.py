"""Token usage of a reply, counted in words (the offline model has no tokenizer).

Both models count with `token_usage`, so the counts over `run_async` and `run_live` match.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from google.genai import types


def _word_count(part: types.Part) -> int:
    if part.text:
        return len(part.text.split())
    if part.function_call:
        payload = json.dumps(part.function_call.args or {}, ensure_ascii=False, sort_keys=True)
        return 1 + len(payload.split())
    if part.function_response:
        payload = json.dumps(
            part.function_response.response or {}, ensure_ascii=False, sort_keys=True, default=str
        )
        return 1 + len(payload.split())
    return 1  # inline data, files, code: count as one "token"


def token_usage(
    contents: Sequence[types.Content], parts: Sequence[types.Part]
) -> types.GenerateContentResponseUsageMetadata:
    """The usage of a response whose `parts` answer the prompt `contents`."""
    prompt = sum(_word_count(p) for c in contents for p in c.parts or [])
    thoughts = sum(_word_count(p) for p in parts if p.thought)
    candidates = sum(_word_count(p) for p in parts if not p.thought)
    return types.GenerateContentResponseUsageMetadata(
        prompt_token_count=prompt,
        candidates_token_count=candidates,
        thoughts_token_count=thoughts or None,
        total_token_count=prompt + candidates + thoughts,
    )
