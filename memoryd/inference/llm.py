"""A client for any OpenAI-compatible chat-completions endpoint (optional LLM merge and
summaries). Off unless ``llm.base_url`` is set. Uses the standard library only, on a
worker thread, with a hard timeout; callers fall back to the non-LLM behaviour on error."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request

from memoryd.core.errors import DeadlineExceeded, FailedPrecondition


class OpenAICompatibleModel:
    def __init__(self, base_url: str, model: str, *, api_key: str = "", timeout: float = 10.0):
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.timeout = timeout
        self._headers = {"Content-Type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"

    async def complete(self, system: str, user: str, *, max_tokens: int = 400) -> str:
        return await asyncio.to_thread(self._complete, system, user, max_tokens)

    def _complete(self, system: str, user: str, max_tokens: int) -> str:
        body = json.dumps(
            {
                "model": self.model,
                "messages": [
                    {"role": "system", "content": system},
                    {"role": "user", "content": user},
                ],
                "temperature": 0,
                "max_tokens": max_tokens,
                "stream": False,
            }
        ).encode()
        request = urllib.request.Request(self.url, data=body, headers=self._headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                payload = json.loads(response.read())
        except TimeoutError as e:
            raise DeadlineExceeded(f"LLM endpoint did not answer within {self.timeout}s") from e
        except (urllib.error.URLError, OSError, ValueError) as e:
            raise FailedPrecondition(f"LLM endpoint failed: {e}") from e
        try:
            content = payload["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as e:
            raise FailedPrecondition("LLM endpoint returned no message content") from e
        if not isinstance(content, str) or not content.strip():
            raise FailedPrecondition("LLM endpoint returned an empty message")
        return content.strip()
