"""Correct solutions written in other styles than the course's, as different students write them.

Each alternative gives the code of every answer cell of its assignment (`answers`) and, where the
student added cells of their own (plain code cells, no nbgrader metadata), `added`: the grade id of
the answer cell each is inserted before, and its code.
"""
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Alternative:
    name: str
    assignment: str
    answers: dict
    added: dict = field(default_factory=dict)
    train: bool = False     # graded with the training check too


# -- 01-attention ----------------------------------------------------------------------------------
EINSUM = Alternative("einsum_unflatten_tril", "01-attention", {
    "sdpa-code": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    d_k = q.size(-1)
    scores = torch.einsum("...qd,...kd->...qk", q, k) / d_k ** 0.5
    if mask is not None:
        scores = scores.masked_fill(mask, -1e9)
    weights = F.softmax(scores, dim=-1)
    return torch.einsum("...qk,...kd->...qd", weights, v), weights
''',
    "mha-code": '''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.h = num_heads
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, x_q, x_kv, mask=None):
        q, k, v = (w(x).unflatten(-1, (self.h, -1)).permute(0, 2, 1, 3)
                   for w, x in ((self.w_q, x_q), (self.w_k, x_kv), (self.w_v, x_kv)))
        out, self.attention_weights = scaled_dot_product_attention(q, k, v, mask)
        return self.w_o(out.permute(0, 2, 1, 3).flatten(2))
''',
    "masks-code": '''
def causal_mask(T):
    return ~torch.tril(torch.ones(T, T, dtype=torch.bool))


def padding_mask(tokens, pad_id):
    return tokens.eq(pad_id).unsqueeze(1).unsqueeze(2)
'''})

HELPERS = Alternative("where_arange_helper_cell", "01-attention", {
    "sdpa-code": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(k.shape[-1]))
    if mask is not None:
        scores = torch.where(mask, torch.full_like(scores, float("-inf")), scores)
    weights = torch.softmax(scores, dim=-1)
    return torch.matmul(weights, v), weights
''',
    "mha-code": '''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        assert d_model % num_heads == 0
        self.num_heads = num_heads
        for name in ("w_q", "w_k", "w_v", "w_o"):
            setattr(self, name, nn.Linear(d_model, d_model))

    def forward(self, x_q, x_kv, mask=None):
        q = split_heads(self.w_q(x_q), self.num_heads)
        k, v = (split_heads(layer(x_kv), self.num_heads) for layer in (self.w_k, self.w_v))
        out, weights = scaled_dot_product_attention(q, k, v, mask=mask)
        self.attention_weights = weights
        return self.w_o(merge_heads(out))
''',
    "masks-code": '''
def causal_mask(T):
    i = torch.arange(T)
    return i[None, :] > i[:, None]


def padding_mask(tokens, pad_id):
    return (tokens == pad_id).view(tokens.shape[0], 1, 1, tokens.shape[1])
'''}, added={"mha-code": '''
def split_heads(x, num_heads):
    """[B, T, d_model] -> [B, heads, T, d_model / heads]"""
    B, T, D = x.shape
    return x.reshape(B, T, num_heads, D // num_heads).transpose(1, 2)


def merge_heads(x):
    """[B, heads, T, d] -> [B, T, heads * d]"""
    B, h, T, d = x.shape
    return x.transpose(1, 2).contiguous().view(B, T, h * d)
'''})


# -- 02-layers -------------------------------------------------------------------------------------
SUBLAYERS = Alternative("sublayer_wrapper_exp_log_stack", "02-layers", {
    "positions-code": '''
def positional_encoding(T, d_model):
    pos = torch.arange(T).float().unsqueeze(1)
    div = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
    angles = pos * div
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1)
''',
    "ffn-code": '''
class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.activation = nn.ReLU()
        self.linear2 = nn.Linear(d_ff, d_model)

    def forward(self, x):
        return self.linear2(self.activation(self.linear1(x)))
''',
    "encoder-code": '''
class EncoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.ffn = FeedForward(d_model, d_ff)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.sub1 = SublayerConnection(self.norm1, self.dropout)
        self.sub2 = SublayerConnection(self.norm2, self.dropout)

    def forward(self, x, mask=None):
        x = self.sub1(x, lambda h: self.self_attn(h, h, mask))
        return self.sub2(x, self.ffn)
''',
    "decoder-code": '''
class DecoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.cross_attn = MultiHeadAttention(d_model, num_heads)
        self.ffn = FeedForward(d_model, d_ff)
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(d_model) for _ in range(3))
        self.dropout = nn.Dropout(dropout)
        self.sublayers = nn.ModuleList(SublayerConnection(norm, self.dropout)
                                       for norm in (self.norm1, self.norm2, self.norm3))

    def forward(self, y, memory, self_mask=None, memory_mask=None):
        if self_mask is not None and self_mask.dim() == 2:
            self_mask = self_mask[None, None]           # [1, 1, Ty, Ty], to be explicit
        y = self.sublayers[0](y, lambda h: self.self_attn(h, h, self_mask))
        y = self.sublayers[1](y, lambda h: self.cross_attn(h, memory, memory_mask))
        return self.sublayers[2](y, self.ffn)
''',
    "classifier-code": '''
class EncoderClassifier(nn.Module):
    def __init__(self, vocab_size, num_classes, d_model, num_heads, num_layers, d_ff,
                 dropout=0.1, pad_id=0, max_len=64):
        super().__init__()
        self.pad_id, self.scale = pad_id, math.sqrt(d_model)
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.layers = nn.ModuleList()
        for _ in range(num_layers):
            self.layers.append(EncoderLayer(d_model, num_heads, d_ff, dropout))
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(d_model, num_classes)

    def forward(self, tokens):
        pads = tokens == self.pad_id
        positions = positional_encoding(tokens.shape[1], self.embedding.embedding_dim)
        x = self.dropout(self.embedding(tokens) * self.scale + positions)
        for layer in self.layers:
            x = layer(x, mask=pads[:, None, None, :])
        x = x.masked_fill(pads.unsqueeze(-1), 0.0)
        pooled = x.sum(1) / (~pads).sum(1, keepdim=True)
        return self.head(pooled).log_softmax(-1)
'''}, added={"encoder-code": '''
class SublayerConnection(nn.Module):
    """Post-norm residual around a sublayer: norm(x + dropout(sublayer(x)))."""

    def __init__(self, norm, dropout):
        super().__init__()
        self.norm, self.dropout = norm, dropout

    def forward(self, x, sublayer):
        return self.norm(x + self.dropout(sublayer(x)))
'''})

FUNCTIONAL = Alternative("functional_dropout_loop_outer", "02-layers", {
    "positions-code": '''
def positional_encoding(T, d_model):
    i = torch.arange(d_model // 2, dtype=torch.float64)
    freq = 1.0 / (10000 ** (2 * i / d_model))
    angle = torch.outer(torch.arange(T, dtype=torch.float64), freq)
    table = torch.empty(T, d_model, dtype=torch.float64)
    table[:, ::2], table[:, 1::2] = angle.sin(), angle.cos()
    return table.float()
''',
    "ffn-code": '''
class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

    def forward(self, x):
        return self.linear2(self.linear1(x).clamp(min=0))
''',
    "encoder-code": '''
class EncoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.ffn = FeedForward(d_model, d_ff)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.p = dropout

    def forward(self, x, mask=None):
        x = add_and_norm(self.norm1, x, self.self_attn(x, x, mask), self.p, self.training)
        return add_and_norm(self.norm2, x, self.ffn(x), self.p, self.training)
''',
    "decoder-code": '''
class DecoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.cross_attn = MultiHeadAttention(d_model, num_heads)
        self.ffn = FeedForward(d_model, d_ff)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.p = dropout

    def forward(self, y, memory, self_mask=None, memory_mask=None):
        steps = [(self.norm1, lambda h: self.self_attn(h, h, self_mask)),
                 (self.norm2, lambda h: self.cross_attn(h, memory, memory_mask)),
                 (self.norm3, self.ffn)]
        for norm, sublayer in steps:
            y = add_and_norm(norm, y, sublayer(y), self.p, self.training)
        return y
''',
    "classifier-code": '''
class EncoderClassifier(nn.Module):
    def __init__(self, vocab_size, num_classes, d_model, num_heads, num_layers, d_ff,
                 dropout=0.1, pad_id=0, max_len=64):
        super().__init__()
        self.pad_id, self.d_model, self.p = pad_id, d_model, dropout
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.register_buffer("pe", positional_encoding(max_len, d_model))
        self.layers = nn.ModuleList([EncoderLayer(d_model, num_heads, d_ff, dropout)
                                     for _ in range(num_layers)])
        self.head = nn.Linear(d_model, num_classes)

    def forward(self, tokens):
        x = self.embedding(tokens) * self.d_model ** 0.5 + self.pe[: tokens.size(1)]
        x = F.dropout(x, self.p, self.training)
        mask = padding_mask(tokens, self.pad_id)
        for layer in self.layers:
            x = layer(x, mask)
        keep = (tokens != self.pad_id).float()
        pooled = torch.einsum("btd,bt->bd", x, keep) / keep.sum(1, keepdim=True)
        return F.log_softmax(self.head(pooled), dim=-1)
'''}, added={"encoder-code": '''
def add_and_norm(norm, x, out, p, training):
    """The post-norm residual step: norm(x + dropout(out))."""
    return norm(x + F.dropout(out, p, training))
'''})


# -- 03-sorting ------------------------------------------------------------------------------------
LINEAR = Alternative("f_linear_triu_preallocated", "03-sorting", {
    "model-code": '''
class Transformer(nn.Module):
    def __init__(self, vocab_size, d_model=32, num_heads=4, num_layers=2, d_ff=128, dropout=0.1,
                 max_len=64):
        super().__init__()
        self.d_model = d_model
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.encoder = nn.ModuleList([EncoderLayer(d_model, num_heads, d_ff, dropout)
                                      for _ in range(num_layers)])
        self.decoder = nn.ModuleList([DecoderLayer(d_model, num_heads, d_ff, dropout)
                                      for _ in range(num_layers)])
        self.drop = nn.Dropout(dropout)
        self.register_buffer("pe", positional_encoding(max_len, d_model), persistent=False)

    def embed(self, tokens):
        return self.drop(self.embedding(tokens) * self.d_model ** 0.5 + self.pe[: tokens.size(1)])

    def encode(self, src, src_mask=None):
        h = self.embed(src)
        for layer in self.encoder:
            h = layer(h, mask=src_mask)
        return h

    def decode(self, tgt_in, memory, memory_mask=None):
        T = tgt_in.size(1)
        future = torch.triu(torch.full((T, T), True, device=tgt_in.device), diagonal=1)
        h = self.embed(tgt_in)
        for layer in self.decoder:
            h = layer(h, memory, self_mask=future, memory_mask=memory_mask)
        return F.linear(h, self.embedding.weight)

    def forward(self, src, tgt_in):
        memory = self.encode(src)
        return self.decode(tgt_in, memory)
''',
    "schedule-code": '''
def noam_rate(step, d_model, warmup):
    return min(step / warmup ** 1.5, 1 / math.sqrt(step)) / math.sqrt(d_model)
''',
    "teacher-code": '''
def shift_right(y, bos):
    return F.pad(y, (1, 0), value=bos)[:, :-1]


def smoothing_floor(eps, vocab_size):
    target = torch.full((vocab_size,), eps / vocab_size, dtype=torch.float64)
    target[0] += 1 - eps
    return float(-(target * target.log()).sum())
''',
    "greedy-code": '''
def greedy_decode(model, src, bos, length=None):
    steps = length if length is not None else src.size(1)
    with torch.no_grad():
        memory = model.encode(src)
        tokens = torch.full((src.size(0), steps + 1), bos, dtype=torch.long)
        for t in range(steps):
            logits = model.decode(tokens[:, : t + 1], memory)[:, -1].clone()
            logits[:, bos] = -float("inf")
            tokens[:, t + 1] = logits.argmax(-1)
    return tokens[:, 1:]
'''}, train=True)

SCALED = Alternative("scaled_embedding_tied_linear_while_loop", "03-sorting", {
    "model-code": '''
class Transformer(nn.Module):
    def __init__(self, vocab_size, d_model=32, num_heads=4, num_layers=2, d_ff=128, dropout=0.1,
                 max_len=64):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.scaled = ScaledEmbedding(self.embedding, max_len)
        self.encoder = nn.ModuleList(EncoderLayer(d_model, num_heads, d_ff, dropout)
                                     for _ in range(num_layers))
        self.decoder = nn.ModuleList(DecoderLayer(d_model, num_heads, d_ff, dropout)
                                     for _ in range(num_layers))
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(d_model, vocab_size, bias=False)
        self.out.weight = self.embedding.weight          # one matrix, used at both ends

    def embed(self, tokens):
        return self.dropout(self.scaled(tokens))

    def encode(self, src, src_mask=None):
        x = self.embed(src)
        for layer in self.encoder:
            x = layer(x, src_mask)
        return x

    def decode(self, tgt_in, memory, memory_mask=None):
        y = self.embed(tgt_in)
        for layer in self.decoder:
            y = layer(y, memory, causal_mask(tgt_in.shape[1]), memory_mask)
        return self.out(y)

    def forward(self, src, tgt_in):
        return self.decode(tgt_in, self.encode(src))
''',
    "schedule-code": '''
def noam_rate(step, d_model, warmup):
    return d_model ** -0.5 * (step ** -0.5 if step >= warmup else step * warmup ** -1.5)
''',
    "teacher-code": '''
def shift_right(y, bos):
    shifted = y.roll(1, dims=1)
    shifted[:, 0] = bos
    return shifted


def smoothing_floor(eps, vocab_size):
    probs = [1 - eps + eps / vocab_size] + [eps / vocab_size] * (vocab_size - 1)
    return -sum(p * math.log(p) for p in probs)
''',
    "greedy-code": '''
@torch.inference_mode()
def greedy_decode(model, src, bos, length=None):
    n = src.shape[1] if length is None else length
    memory = model.encode(src)
    ys = src.new_full((src.shape[0], 1), bos)
    while ys.shape[1] <= n:
        scores = model.decode(ys, memory)[:, -1, :]
        scores[:, bos] = scores.min() - 1
        ys = torch.cat((ys, scores.argmax(-1, keepdim=True)), dim=1)
    return ys[:, 1:]
'''}, added={"model-code": '''
class ScaledEmbedding(nn.Module):
    """The model's input layer: token embedding times sqrt(d_model), plus the positions."""

    def __init__(self, embedding, max_len):
        super().__init__()
        self.embedding = embedding
        self.scale = math.sqrt(embedding.embedding_dim)
        self.register_buffer("positions", positional_encoding(max_len, embedding.embedding_dim),
                             persistent=False)

    def forward(self, tokens):
        return self.embedding(tokens) * self.scale + self.positions[: tokens.shape[1]]
'''})

ALTERNATIVES = [EINSUM, HELPERS, SUBLAYERS, FUNCTIONAL, LINEAR, SCALED]
