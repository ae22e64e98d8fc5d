"""The scripted model in this process, behind the LLM seam: what `FakeLLMServer` answers, without HTTP."""

from __future__ import annotations

from ..llm.transport.client import chat_body, request_headers
from ..llm.types import ChatRequest, Completion, Usage
from . import _text as t
from ._reading import Reading
from ._server import scripted_reply, within


class ScriptedModel:
    """An in-process model for `r3con.run(..., llm=ScriptedModel())`: the scripted server's replies to each
    request (notes from the document's text, records from the response schema), its token counts, and
    a reply kept within `max_tokens` as a model told it would write it. `requests` lists what it was sent."""

    def __init__(self, name: str = "r3con-scripted", note_sentences: int = 3):
        self.name = name
        self.note_sentences = note_sentences
        self.requests: list[ChatRequest] = []

    async def complete(self, request: ChatRequest) -> Completion:
        self.requests.append(request)
        body = chat_body(request, request.model or self.name)
        content = scripted_reply(Reading.of(body, request_headers(request)), self.note_sentences)
        if request.max_tokens and t.tokens(content) > request.max_tokens:
            content = within(content, request.max_tokens)
        prompt = "".join(f"{m.role}:{m.content}\n" for m in request.messages)
        usage = Usage(calls=1, prompt_tokens=t.tokens(prompt), completion_tokens=t.tokens(content))
        return Completion(content=content, finish_reason="stop", usage=usage, model=request.model or self.name)
