"""The answer of an embeddings call (``client.embed(...)``): one ``array('f')`` per input."""

import sys
from array import array
from typing import Any, Dict, Iterator, List, Optional

from ._types import Usage

_SWAP = sys.byteorder != "little"


def _vectors(data: bytes, count: int, dimensions: int) -> "List[array[float]]":
    """``count`` arrays of ``dimensions`` float32s, each filled by one bulk copy of its slice of
    ``data`` (little-endian float32s, one vector after another): no Python float per element."""
    view = memoryview(data)
    step = dimensions * 4
    out: "List[array[float]]" = []
    for i in range(count):
        v = array("f")
        v.frombytes(view[i * step : (i + 1) * step])
        if _SWAP:
            v.byteswap()
        out.append(v)
    return out


class EmbedResponse:
    """The vectors of an embeddings call, in input order, with what they cost.

    ``vectors[i]`` is input ``i``'s vector, an ``array('f')`` of ``dimensions`` float32s
    (``numpy.asarray(v)`` or ``memoryview(v)`` read it without a copy); ``data`` is every
    vector as little-endian float32 bytes, one after another
    (``numpy.frombuffer(r.data, "<f4").reshape(r.count, r.dimensions)``). The inputs were split
    into ``batches`` calls (each routed, failed over and priced); ``provider`` and ``trace_id``
    are the first batch's, ``usage``, ``cost`` and ``attempts`` the sum over every batch.
    """

    # A dict of slots documents each attribute (help(), inspect.getdoc).
    __slots__ = {
        "vectors": "One ``array('f')`` per input, in input order.",
        "data": "Every vector as little-endian float32 bytes, one after another.",
        "count": "How many vectors (one per input).",
        "dimensions": "The length of every vector.",
        "usage": "Token counts over every batch (``None`` when the provider reports none).",
        "cost": "The cost from the providers' configured prices and the usage they reported.",
        "route": "The route of the call.",
        "provider": "The provider that answered the first batch.",
        "model": "The model that answered (the provider's report, else its configured model).",
        "batches": "How many calls the inputs were split into.",
        "attempts": "Attempts across every batch.",
        "trace_id": "The first batch's W3C trace id.",
        "elapsed_ms": "Wall time of the whole call, every batch included, in milliseconds.",
    }

    vectors: "List[array[float]]"
    data: bytes
    count: int
    dimensions: int
    usage: Optional[Usage]
    cost: Optional[float]
    route: str
    provider: Optional[str]
    model: Optional[str]
    batches: int
    attempts: int
    trace_id: str
    elapsed_ms: float

    @classmethod
    def _from(cls, d: Dict[str, Any]) -> "EmbedResponse":
        """Builds one from the dict that crossed from the core: the fields of the generated
        ``harness._types.EmbedResponse`` and ``data``."""
        fields = d
        self = cls.__new__(cls)
        self.data = d["data"]
        self.count = fields["count"]
        self.dimensions = fields["dimensions"]
        self.vectors = _vectors(self.data, self.count, self.dimensions)
        u = fields["usage"]
        self.usage = None if u is None else Usage._from(u)
        self.cost = fields["cost"]
        self.route = fields["route"]
        self.provider = fields["provider"]
        self.model = fields["model"]
        self.batches = fields["batches"]
        self.attempts = fields["attempts"]
        self.trace_id = fields["trace_id"]
        self.elapsed_ms = fields["elapsed_ms"]
        return self

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> "Iterator[array[float]]":
        return iter(self.vectors)

    def __getitem__(self, i: int) -> "array[float]":
        return self.vectors[i]

    def __repr__(self) -> str:
        return (
            f"EmbedResponse(count={self.count!r}, dimensions={self.dimensions!r}, usage={self.usage!r}, "
            f"cost={self.cost!r}, route={self.route!r}, provider={self.provider!r}, model={self.model!r}, "
            f"batches={self.batches!r}, attempts={self.attempts!r}, trace_id={self.trace_id!r}, "
            f"elapsed_ms={self.elapsed_ms!r})"
        )
