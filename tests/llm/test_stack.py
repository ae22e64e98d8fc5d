"""The LLM stack as data: the layers the settings use, listed top to bottom, and a user's own layer
(`r3con.llm.Wrapper`) stacked in, over real HTTP to the scripted server."""

import json
from dataclasses import replace

import r3con
from r3con.llm import ChatRequest, Completion, Message, Wrapper, build_llm

DEFAULT = ("shaped", "recorded", "accounted", "answered", "output checked", "retrying", "overflows",
           "rate limited", "concurrency limited")


def settings(server, tmp_path, **kw) -> r3con.Settings:
    return r3con.Settings.resolve(env={}, base_url=server.base_url, out_dir=tmp_path / "runs",
                                  cache_path=tmp_path / "llm.sqlite", **kw)


def note_request(text: str = "Dracula went to Whitby.") -> ChatRequest:
    return ChatRequest(messages=(Message("user", f'<document number="1">{text}</document>'),), stage="relevance", doc=1)


async def test_the_stack_lists_the_layers_its_settings_use_top_to_bottom(fake_server, tmp_path):
    async with build_llm(settings(fake_server, tmp_path)) as stack:
        assert stack.layers == DEFAULT
    async with build_llm(settings(fake_server, tmp_path, max_cost_usd=1.0, context_window=4096)) as stack:
        assert stack.layers == (*DEFAULT, "budget guard")
    async with build_llm(settings(fake_server, tmp_path, batch=True)) as stack:
        assert "concurrency limited" not in stack.layers and stack.layers[-1] == "rate limited"


class Briefly(Wrapper):
    """A user's layer: asks every request to be brief, and keeps what it saw."""

    instruction = "Answer in one sentence."

    def __init__(self, inner):
        super().__init__(inner)
        self.seen: list[tuple[ChatRequest, Completion]] = []

    async def complete(self, request: ChatRequest) -> Completion:
        request = replace(request, messages=(Message("system", self.instruction), *request.messages))
        completion = await self.inner.complete(request)
        self.seen.append((request, completion))
        return completion


class MoreBriefly(Briefly):
    instruction = "Answer in three words."


async def test_a_users_layer_sees_each_request_as_sent_and_its_change_is_what_is_logged_and_cached(
        fake_server, tmp_path):
    made: list[Briefly] = []

    def briefly(cls):
        def wrap(inner):
            made.append(cls(inner))
            return made[-1]
        return wrap

    config = settings(fake_server, tmp_path, log_calls="full", max_tokens_cap=300)
    async with build_llm(config, calls_log=tmp_path / "calls.jsonl", layers=[briefly(Briefly)]) as stack:
        assert stack.layers[:3] == ("shaped", "user: wrap", "recorded")
        first = await stack.complete(note_request())
    request, reply = made[0].seen[0]
    assert request.max_tokens == 300 and request.model == "r3con-scripted", "it sees the request as Shaped made it"
    assert reply.content == first.content and not reply.from_cache and len(fake_server.calls()) == 1
    logged = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert logged[0]["request"]["messages"][0] == {"role": "system", "content": "Answer in one sentence."}

    async with build_llm(config, layers=[briefly(Briefly)]) as stack:  # the same layer: the cache answers
        again = await stack.complete(note_request())
    assert again.content == first.content and made[1].seen[0][1].from_cache and len(fake_server.calls()) == 1

    async with build_llm(config, layers=[briefly(MoreBriefly)]) as stack:  # another change: another request
        await stack.complete(note_request())
    assert not made[2].seen[0][1].from_cache and len(fake_server.calls()) == 2


async def test_a_wrapper_class_is_a_layer_and_several_stack_in_the_order_given(fake_server, tmp_path):
    async with build_llm(settings(fake_server, tmp_path), layers=[MoreBriefly, Briefly]) as stack:
        assert stack.layers[:4] == ("shaped", "user: MoreBriefly", "user: Briefly", "recorded")
        outer = stack.top.inner  # below Shaped
        assert isinstance(outer, MoreBriefly) and isinstance(outer.inner, Briefly)
        await stack.complete(note_request())
    sent = outer.inner.seen[0][0].messages
    assert [m.content for m in sent[:2]] == ["Answer in one sentence.", "Answer in three words."]
