"""Stand-ins: small known modules put in place of the parts a component depends on.

A check of one component swaps these in for its dependencies, so that a bug elsewhere cannot cost
its points twice. They compute something simple and deliberately unlike the solution (they are no
attention, no feed-forward block), and they record what they were called with, so the trusted side
can tell, say, that a decoder layer gave its cross-attention the target instead of the memory.

This file runs on both sides (it is copied into the sandbox): the trusted side builds the same
stand-ins from the same seed to compute what a correct component must return around them.

Every stand-in accepts, and ignores, arguments beyond the contract's (a `dropout=None` that the
student's own helper takes, say), so that a class that passes its helper an extra optional
argument is graded on its wiring, not stopped by a TypeError.
"""
import torch
from torch import nn


def _weights(seed: int, *shape: int, scale: float = 1.0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator) * scale


def mask_problem(mask, shape) -> str | None:
    """What keeps `mask` from being the contract's attention mask for weights of `shape` [B, h,
    Tq, Tk] (h None: any number of heads): "dtype" (not bool: an additive float mask, say),
    "heads" (three axes, the first over 1: it lines up with the heads, not the batch), "shape"
    (it does not broadcast to `shape`), or None (a mask the real attention reads as meant)."""
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        return "dtype"
    if mask.dim() == 3 and mask.shape[0] > 1:
        return "heads"
    batch, heads, queries, keys = shape
    if mask.dim() > 4:
        return "shape"
    target = (batch, mask.shape[1] if heads is None and mask.dim() == 4 else heads or 1,
              queries, keys)
    for size, wanted in zip(reversed(mask.shape), reversed(target)):
        if size not in (1, wanted):
            return "shape"
    return None


MASK_PROBLEMS = {
    "dtype": "the attention mask must be a bool tensor, True at the keys to block (as "
             "padding_mask gives), not {dtype}",
    "heads": "an attention mask of shape {shape} lines its first axis up with the heads, not the "
             "batch: it must broadcast to [B, num_heads, Tq, Tk], as [B, 1, 1, Tk] does",
    "shape": "an attention mask of shape {shape} does not broadcast to [B, num_heads, Tq, Tk] = "
             "{target}",
}


def _key_mask(mask, like: torch.Tensor, heads=None):
    """Reduce an attention mask to [B or 1, Tq or 1, Tk], the shape of weights without heads, after
    refusing, as the real attention would, a mask that is not the contract's: bool, True where
    blocked, broadcastable to [B, num_heads, Tq, Tk] (`heads` None: any number of heads)."""
    if mask is None:
        return None
    target = (like.shape[0], heads, like.shape[1], like.shape[2])
    problem = mask_problem(mask, target)
    if problem:
        raise ValueError(MASK_PROBLEMS[problem].format(
            dtype=getattr(mask, "dtype", type(mask).__name__),
            shape=list(getattr(mask, "shape", [])), target=[target[0], heads or "h", *target[2:]]))
    if mask.dim() == 4:
        mask = mask.any(dim=1)
    elif mask.dim() < 3:
        mask = mask.reshape(*([1] * (3 - mask.dim())), *mask.shape)
    return mask.expand(like.shape[0], like.shape[1], like.shape[2])


def mixing_weights(x_q: torch.Tensor, x_kv: torch.Tensor, mask=None, heads=None) -> torch.Tensor:
    """Sigmoid similarity between queries and keys, zero where the mask blocks: [B, Tq, Tk]."""
    weights = torch.sigmoid(x_q @ x_kv.transpose(-2, -1) / x_q.shape[-1])
    mask = _key_mask(mask, weights, heads)
    return weights if mask is None else weights.masked_fill(mask, 0.0)


class Recorder:
    """Remembers the calls a stand-in received (tensors kept, so both sides can compare)."""

    def __init__(self):
        self.calls = []

    def record(self, **arguments):
        self.calls.append({name: (value.detach().clone() if isinstance(value, torch.Tensor)
                                  else value) for name, value in arguments.items()})


class AttentionFunction(Recorder):
    """In place of scaled_dot_product_attention(q, k, v, mask) -> (out, weights)."""

    def __call__(self, q, k, v, mask=None, *extra, **options):
        self.record(q_shape=list(q.shape), k_shape=list(k.shape), v_shape=list(v.shape),
                    masked=mask is not None)
        weights = torch.sigmoid(q @ k.transpose(-2, -1))
        if mask is not None:
            weights = weights.masked_fill(torch.as_tensor(mask, dtype=torch.bool), 0.0)
        return weights @ v / 4.0, weights


class PositionalTable(Recorder):
    """In place of positional_encoding(T, d_model) -> [T, d_model]: a fixed table, not sinusoids.

    Row t depends on t alone, so the first rows of a long table equal a short table: a model that
    builds its table once for max_len and one that builds it per call get the same positions.
    """

    def __call__(self, T, d_model, *extra, **options):
        self.record(T=int(T), d_model=int(d_model))
        position = torch.arange(int(T), dtype=torch.float32)[:, None]
        column = torch.arange(int(d_model), dtype=torch.float32)[None, :]
        return 0.8 * torch.tanh(0.3 * position - 0.2 * column) * torch.cos(position + column)


class AttentionProbe(nn.Module):
    """In place of a MultiHeadAttention sublayer: forward(x_q, x_kv, mask=None)."""

    def __init__(self, d_model: int, seed: int):
        super().__init__()
        self.register_buffer("a", _weights(seed, d_model, d_model, scale=d_model ** -0.5))
        self.register_buffer("b", _weights(seed + 1, d_model, d_model, scale=d_model ** -0.5))
        self.recorder = Recorder()

    def forward(self, x_q, x_kv, mask=None, *extra, **options):
        self.recorder.record(x_q=x_q, x_kv=x_kv, mask=mask)
        mixed = mixing_weights(x_q, x_kv, mask) @ x_kv / 4.0
        return torch.tanh(x_q @ self.a) + mixed @ self.b


class FeedForwardProbe(nn.Module):
    """In place of a FeedForward sublayer: forward(x)."""

    def __init__(self, d_model: int, seed: int):
        super().__init__()
        self.register_buffer("c", _weights(seed, d_model, d_model, scale=d_model ** -0.5))
        self.recorder = Recorder()

    def forward(self, x, *extra, **options):
        self.recorder.record(x=x)
        return torch.tanh(x @ self.c) * 1.5


class AttentionWeightsProbe(nn.Module):
    """The self_attn of an EncoderLayerProbe: what the contract's MultiHeadAttention exposes,
    forward(x_q, x_kv, mask=None) and its last weights [B, num_heads, Tq, Tk] in
    self.attention_weights, around the stand-in's mixing (no attention), so that a classifier that
    reads each layer's attention weights (as d2l's encoder does) runs around stand-ins too."""

    def __init__(self, num_heads=None, keep_graph: bool = True):
        super().__init__()
        self.num_heads, self.keep_graph = num_heads, keep_graph
        self.attention_weights = None

    def forward(self, x_q, x_kv, mask=None, *extra, **options):
        weights = mixing_weights(x_q, x_kv, mask, self.num_heads)
        kept = weights if self.keep_graph else weights.detach()
        self.attention_weights = kept[:, None].expand(weights.shape[0], self.num_heads or 1,
                                                      *weights.shape[1:])
        return weights @ x_kv / 4.0


class EncoderLayerProbe(nn.Module):
    """In place of an EncoderLayer inside the classifier: forward(x, mask=None). The mask must be
    the contract's (bool, broadcastable to [B, num_heads, T, T]; see _key_mask), as the real
    layer's attention needs it; its self_attn keeps attention weights as the real one does."""

    records = True          # every call (x, mask) is kept, for the grader's messages

    def __init__(self, d_model: int, seed: int, num_heads=None):
        super().__init__()
        self.register_buffer("d", _weights(seed, d_model, d_model, scale=d_model ** -0.5))
        self.self_attn = AttentionWeightsProbe(num_heads, keep_graph=self.records)
        self.recorder = Recorder()

    def forward(self, x, mask=None, *extra, **options):
        self.recorder.record(x=x, mask=mask)
        return x + torch.tanh((x + self.self_attn(x, x, mask)) @ self.d)


class QuietEncoderLayerProbe(EncoderLayerProbe):
    """EncoderLayerProbe that records nothing but a mask it refuses, and keeps its attention
    weights detached: for training through it (the regressor's trained check), where it runs
    thousands of times and a record of each call would only fill memory. Its twin on the trusted
    side may be an EncoderLayerProbe of the same seed: same outputs."""

    records = False

    def forward(self, x, mask=None, *extra, **options):
        try:
            mixed = self.self_attn(x, x, mask)
        except ValueError:
            self.recorder.calls = []
            self.recorder.record(mask=mask)
            raise
        return x + torch.tanh((x + mixed) @ self.d)


class Seq2SeqProbe(nn.Module):
    """A tiny encoder-decoder with the contract's encode/decode, for checking greedy decoding.

    variant "mixed": logits depend on the whole prefix and the memory (a fixed random network);
    "bos": the same, with the BOS token always the most likely; "count": the next token is the
    last token plus 3 (mod 10), so reading any position but the last shows, and after BOS a token
    that the memory decides (a fixed random read of it), so that the answer depends on src.
    """

    def __init__(self, vocab_size: int, variant: str, seed: int, d: int = 16):
        super().__init__()
        self.vocab_size, self.variant = vocab_size, variant
        self.register_buffer("src_table", _weights(seed, vocab_size, d))
        self.register_buffer("tgt_table", _weights(seed + 1, vocab_size, d))
        self.register_buffer("out", _weights(seed + 2, d, vocab_size, scale=0.7))
        self.encode_calls = 0
        self.decode_calls = 0

    def encode(self, src, src_mask=None, *extra, **options):
        self.encode_calls += 1
        return self.src_table[src]

    def decode(self, tgt_in, memory, memory_mask=None, *extra, **options):
        self.decode_calls += 1
        batch, steps = tgt_in.shape
        if self.variant == "count":
            first = (memory.mean(dim=1) @ self.out[:, :10]).argmax(dim=-1, keepdim=True)
            following = torch.where(tgt_in >= 10, first.expand(batch, steps),
                                    (tgt_in.clamp(max=9) + 3) % 10)
            return nn.functional.one_hot(following, self.vocab_size).float() * 5.0
        h = self.tgt_table[tgt_in].cumsum(dim=1) / torch.arange(1, steps + 1).view(1, -1, 1)
        h = torch.tanh(h + memory.mean(dim=1, keepdim=True))
        logits = h @ self.out
        if self.variant == "bos":
            logits[..., self.vocab_size - 1] = logits.max() + 10.0
        return logits

    def forward(self, src, tgt_in, *extra, **options):
        return self.decode(tgt_in, self.encode(src))


class RemoteModel(nn.Module):
    """An encoder-decoder stand-in with no weights of its own: each encode and decode is a request
    to the trusted grader, which computes the answer with its twin and counts the calls there, so
    nothing in the student's process can change the count or see the twin's weights."""

    def __init__(self, handle: str, call, vocab_size: int):
        super().__init__()
        self._handle, self._call, self.vocab_size = handle, call, vocab_size
        # One parameter, so that `next(model.parameters()).device` works as on a real model.
        self.anchor = nn.Parameter(torch.zeros(1), requires_grad=False)

    def encode(self, src, src_mask=None, *args, **kwargs):
        return self._call(self._handle, "encode", [src])

    def decode(self, tgt_in, memory, memory_mask=None, *args, **kwargs):
        return self._call(self._handle, "decode", [tgt_in, memory])

    def forward(self, src, tgt_in, *args, **kwargs):
        return self.decode(tgt_in, self.encode(src))


def _given(value):
    """An argument a class was built with, as data: a number as it is, anything else by its
    type's name (an activation class, a module), so that the record can cross the boundary."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return {"$type": type(value).__name__}


class FeedForwardFactory(Recorder):
    """In place of the FeedForward class while a layer is built: each call gives a stand-in, so a
    layer can be built, and graded, even when the student's FeedForward cannot. It records every
    argument the layer built it with (`args`, `kwargs`), so that the layer's parameter check can
    tell FeedForward(d_ff, d_model) or FeedForward(d_model, d_model) from FeedForward(d_model,
    d_ff): the stand-in would run either way."""

    def __call__(self, d_model, *args, **kwargs):
        self.record(d_model=_given(d_model), args=[_given(arg) for arg in args],
                    kwargs={str(name): _given(value) for name, value in kwargs.items()})
        return FeedForwardProbe(int(d_model), seed=300 + len(self.calls))


class EncoderLayerFactory(Recorder):
    """In place of the EncoderLayer class while the classifier is built, likewise; it records the
    arguments the layers were built with (d_model, num_heads, d_ff, dropout)."""

    def __call__(self, d_model, *args, **kwargs):
        given = dict(zip(("num_heads", "d_ff", "dropout"), args), **kwargs)
        self.record(d_model=int(d_model), **{name: given.get(name) for name in
                                             ("num_heads", "d_ff", "dropout")
                                             if isinstance(given.get(name), (int, float))})
        heads = given.get("num_heads")
        return EncoderLayerProbe(int(d_model), seed=400 + len(self.calls),
                                 num_heads=int(heads) if isinstance(heads, int) else None)


def probe(kind: str, **options) -> nn.Module:
    """Build a stand-in module by name (the name is what crosses the boundary)."""
    kinds = {"attention": AttentionProbe, "feed_forward": FeedForwardProbe,
             "encoder_layer": EncoderLayerProbe, "seq2seq": Seq2SeqProbe,
             "quiet_encoder_layer": QuietEncoderLayerProbe}
    return kinds[kind](**options)
