"""What the caches did, as the Python API shows it: ``Response.cache`` / ``from_cache`` /
``revalidated``, and ``cache_clear`` on the sync and async clients (README "Caching and
coalescing"). The rules themselves are the shared vectors' (``cache_*``)."""

import asyncio

import pytest

import harness

MAX_AGE = [{"headers": {"cache-control": "max-age=60"}, "body": "v1"}, {"body": "v2"}]


def test_a_hit_is_from_cache_with_no_attempt_until_cache_clear(upstream, config):
    upstream.script("py-cache-clear", MAX_AGE)
    with harness.Client(config(cache={"http": True})) as c:
        first = c.get("svc", "/s/py-cache-clear/r")
        assert (first.from_cache, first.revalidated, first.attempts) == (False, False, 1)
        assert first.cache is not None and first.cache["outcome"] == "miss"

        hit = c.get("svc", "/s/py-cache-clear/r")
        assert hit.from_cache and not hit.revalidated
        assert (hit.attempts, hit.text) == (0, "v1")
        assert hit.cache == {"outcome": "hit", "similarity": None, "saved_cost": None}
        assert "cache=hit" in repr(hit)

        assert c.cache_clear("svc") == 1
        after = c.get("svc", "/s/py-cache-clear/r")
        assert (after.from_cache, after.attempts, after.text) == (False, 1, "v2")

        with pytest.raises(harness.ConfigError, match="cache_clear: unknown service or route `nope`"):
            c.cache_clear("nope")
        assert isinstance(c.cache_clear(), int)
    assert len(upstream.log("py-cache-clear")) == 2


def test_the_async_client_shows_the_stamp_and_clears_too(upstream, config):
    upstream.script("py-cache-clear-async", MAX_AGE)

    async def main():
        async with harness.AsyncClient(config(cache={"http": True})) as c:
            assert not (await c.get("svc", "/s/py-cache-clear-async/r")).from_cache
            hit = await c.get("svc", "/s/py-cache-clear-async/r")
            assert hit.from_cache and hit.attempts == 0 and hit.cache["outcome"] == "hit"
            assert c.cache_clear(name="svc") == 1
            assert not (await c.get("svc", "/s/py-cache-clear-async/r")).from_cache
            with pytest.raises(harness.ConfigError):
                c.cache_clear("nope")

    asyncio.run(main())


def test_a_call_no_cache_touched_has_no_stamp(upstream, config):
    upstream.script("py-cache-none", [{"headers": {"cache-control": "max-age=60"}}])
    with harness.Client(config()) as c:
        r = c.get("svc", "/s/py-cache-none/r")
        assert (r.cache, r.from_cache, r.revalidated) == (None, False, False)
        assert "cache=" not in repr(r)
        # Nothing configured, nothing stored: clearing a known service drops nothing.
        assert c.cache_clear("svc") == 0
