"""The scripted server's prefix-cache model, which the benchmarks and the layout tests rely on."""

from r3con.testing._server import _State

SHARED = "s" * 640  # ten 64-character blocks


def state(blocks: int) -> _State:
    return _State(model="m", max_model_len=10**9, faults=None, log_path=None, cache_blocks=blocks)


def test_a_repeated_prefix_is_served_in_whole_blocks():
    cache = state(1000)
    assert cache.cached_tokens(SHARED + "a" * 200) == 0
    assert cache.cached_tokens(SHARED + "b" * 200) > 0
    assert cache.cached_tokens(SHARED + "a" * 200) == cache.cached_tokens(SHARED + "a" * 192)  # 13 blocks of 64


def test_when_full_it_evicts_the_ends_of_prompts_before_the_prefix_they_share():
    cache = state(20)  # the shared 10 blocks and 10 more
    assert cache.cached_tokens(SHARED + "x" * 6400) == 0  # 110 blocks: far more than the cache holds
    # vLLM evicts the least recently used blocks, a prompt's last blocks first: the shared prefix stays
    assert cache.cached_tokens(SHARED + "y" * 64) == cache.cached_tokens(SHARED) > 0
    again = cache.cached_tokens(SHARED + "x" * 6400)  # its beginning survived, as far as the cache reaches
    assert cache.cached_tokens(SHARED) < again <= 20 * 16


def test_an_old_prompt_is_evicted_before_a_recent_one():
    cache = state(30)
    for letter in "abcd":  # 40 blocks used: the oldest ten ("a") are gone
        assert cache.cached_tokens(letter * 640) == 0
    assert cache.cached_tokens("d" * 640) > 0 and cache.cached_tokens("b" * 640) > 0  # hits add no blocks
    assert cache.cached_tokens("a" * 640) == 0
