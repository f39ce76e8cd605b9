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


def _key_mask(mask, like: torch.Tensor):
    """Reduce an attention mask to [B or 1, Tq or 1, Tk], the shape of weights without heads."""
    if mask is None:
        return None
    mask = torch.as_tensor(mask, dtype=torch.bool)
    if mask.dim() == 4:
        mask = mask.any(dim=1)
    elif mask.dim() < 3:
        mask = mask.reshape(*([1] * (3 - mask.dim())), *mask.shape)
    return mask.expand(like.shape[0], like.shape[1], like.shape[2]) if mask.dim() == 3 else mask


def mixing_weights(x_q: torch.Tensor, x_kv: torch.Tensor, mask=None) -> torch.Tensor:
    """Sigmoid similarity between queries and keys, zero where the mask blocks: [B, Tq, Tk]."""
    weights = torch.sigmoid(x_q @ x_kv.transpose(-2, -1) / x_q.shape[-1])
    mask = _key_mask(mask, weights)
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


class EncoderLayerProbe(nn.Module):
    """In place of an EncoderLayer inside the classifier: forward(x, mask=None)."""

    def __init__(self, d_model: int, seed: int):
        super().__init__()
        self.register_buffer("d", _weights(seed, d_model, d_model, scale=d_model ** -0.5))
        self.recorder = Recorder()

    def forward(self, x, mask=None, *extra, **options):
        self.recorder.record(x=x, mask=mask)
        mixed = mixing_weights(x, x, mask) @ x / 4.0
        return x + torch.tanh((x + mixed) @ self.d)


class QuietEncoderLayerProbe(EncoderLayerProbe):
    """EncoderLayerProbe that records nothing: for training through it (the regressor's trained
    check), where it runs thousands of times and a record of each call would only fill memory.
    Its twin on the trusted side may be an EncoderLayerProbe of the same seed: same outputs."""

    def forward(self, x, mask=None, *extra, **options):
        mixed = mixing_weights(x, x, mask) @ x / 4.0
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


class FeedForwardFactory(Recorder):
    """In place of the FeedForward class while a layer is built: each call gives a stand-in, so a
    layer can be built, and graded, even when the student's FeedForward cannot."""

    def __call__(self, d_model, *args, **kwargs):
        self.record(d_model=int(d_model))
        return FeedForwardProbe(int(d_model), seed=300 + len(self.calls))


class EncoderLayerFactory(Recorder):
    """In place of the EncoderLayer class while the classifier is built, likewise."""

    def __call__(self, d_model, *args, **kwargs):
        self.record(d_model=int(d_model))
        return EncoderLayerProbe(int(d_model), seed=400 + len(self.calls))


def probe(kind: str, **options) -> nn.Module:
    """Build a stand-in module by name (the name is what crosses the boundary)."""
    kinds = {"attention": AttentionProbe, "feed_forward": FeedForwardProbe,
             "encoder_layer": EncoderLayerProbe, "seq2seq": Seq2SeqProbe,
             "quiet_encoder_layer": QuietEncoderLayerProbe}
    return kinds[kind](**options)
