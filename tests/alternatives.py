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
    return float(-torch.xlogy(target, target).sum())        # 0 log 0 = 0
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
    return -sum(p * math.log(p) for p in probs if p > 0)
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



# == Ports of public code ==========================================================================
# Students who know a public implementation (the Annotated Transformer, minGPT/nanoGPT, d2l and
# other course notes) port it to the notebook's contract: the names, signatures and parameter names
# change, the idioms stay. Each port below is written in that project's style (not copied from it)
# and is correct under the contract: run against the course's solution, with the solution's weights
# loaded by name, it gives the same outputs. The idioms that matter to a grader:
#   * a module registered under two names: `clones` + tuple unpacking of the ModuleList into
#     w_q..w_o, a wrapper holding the LayerNorm with `self.norm1 = self.sublayer[0].norm`, an
#     nn.Sequential with `self.linear1 = self.net[0]`, an nn.ModuleDict with `self.layers =
#     self.transformer.h`, an output layer tied to the embedding and registered before it
#     (torch's named_parameters() keeps only the first name of each tensor);
#   * helpers with extra optional arguments of their own (`dropout=None` in the attention
#     function, FeedForward(d_model, d_ff, dropout), noam_rate(..., factor=1.0),
#     decode(..., tgt_mask=None)), which a stand-in put in their place must accept;
#   * masks written other ways: masked_fill(mask, -1e9), torch.finfo(dtype).min, an additive float
#     mask built from the boolean one, a tril buffer compared with 0.
# The contract of 01-attention asks for four nn.Linear named w_q, w_k, w_v, w_o, so nanoGPT's fused
# projection `c_attn = nn.Linear(d, 3 * d)` cannot be a parameter there (and 02/03 take attention
# from attention_parts): the nanoGPT port fuses at run time instead, one F.linear over the
# concatenated w_k and w_v weights.

# -- 01-attention, ported --------------------------------------------------------------------------
ANNOTATED_ATTENTION = Alternative("annotated_clones_unpacked_dropout_arg", "01-attention", {
    "sdpa-code": '''
def scaled_dot_product_attention(q, k, v, mask=None, dropout=None):
    "Compute 'Scaled Dot Product Attention'"
    d_k = q.size(-1)
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask, -1e9)
    p_attn = scores.softmax(dim=-1)
    if dropout is not None:
        p_attn = dropout(p_attn)
    return torch.matmul(p_attn, v), p_attn
''',
    "mha-code": '''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0):
        "Take in model size and number of heads."
        super().__init__()
        assert d_model % num_heads == 0
        # We assume d_v always equals d_k
        self.d_k = d_model // num_heads
        self.h = num_heads
        self.linears = clones(nn.Linear(d_model, d_model), 4)
        self.w_q, self.w_k, self.w_v, self.w_o = self.linears
        self.attention_weights = None
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, x_q, x_kv, mask=None):
        nbatches = x_q.size(0)

        # 1) Do all the linear projections in batch from d_model => h x d_k
        query, key, value = [
            lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)
            for lin, x in zip(self.linears, (x_q, x_kv, x_kv))
        ]

        # 2) Apply attention on all the projected vectors in batch.
        x, self.attention_weights = scaled_dot_product_attention(
            query, key, value, mask, dropout=self.dropout
        )

        # 3) "Concat" using a view and apply a final linear.
        x = x.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)
        del query, key, value
        return self.linears[-1](x)
''',
    "masks-code": '''
def causal_mask(T):
    "Mask out subsequent positions (True: blocked)."
    attn_shape = (T, T)
    subsequent_mask = torch.triu(torch.ones(attn_shape), diagonal=1).type(torch.uint8)
    return subsequent_mask == 1


def padding_mask(tokens, pad_id):
    return (tokens == pad_id).unsqueeze(-2).unsqueeze(-2)
'''}, added={"mha-code": '''
import copy


def clones(module, N):
    "Produce N identical layers."
    return nn.ModuleList([copy.deepcopy(module) for _ in range(N)])
'''})

NANOGPT_ATTENTION = Alternative("nanogpt_fused_kv_finfo_tril", "01-attention", {
    "sdpa-code": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    # manual implementation of attention
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    if mask is not None:
        att = att.masked_fill(mask, torch.finfo(att.dtype).min)
    att = F.softmax(att, dim=-1)
    y = att @ v  # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)
    return y, att
''',
    "mha-code": '''
class MultiHeadAttention(nn.Module):

    def __init__(self, d_model, num_heads):
        super().__init__()
        assert d_model % num_heads == 0
        # query, key, value projections for all heads (four layers: the names the course asks for)
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, d_model)
        self.w_v = nn.Linear(d_model, d_model)
        # output projection
        self.w_o = nn.Linear(d_model, d_model)
        self.n_head = num_heads
        self.n_embd = d_model

    def forward(self, x_q, x_kv, mask=None):
        B, T, C = x_q.size()  # batch size, sequence length, embedding dimensionality (n_embd)
        S = x_kv.size(1)

        # keys and values in one fused projection, split after
        w_kv = torch.cat((self.w_k.weight, self.w_v.weight), dim=0)
        b_kv = torch.cat((self.w_k.bias, self.w_v.bias), dim=0)
        k, v = F.linear(x_kv, w_kv, b_kv).split(self.n_embd, dim=2)
        q = F.linear(x_q, self.w_q.weight, self.w_q.bias)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, S, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, S, hs)
        v = v.view(B, S, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, S, hs)

        y, self.attention_weights = scaled_dot_product_attention(q, k, v, mask)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # re-assemble all head outputs
        return self.w_o(y)
''',
    "masks-code": '''
def causal_mask(T):
    return torch.tril(torch.ones(T, T)).view(T, T) == 0


def padding_mask(tokens, pad_id):
    B, T = tokens.size()
    return (tokens == pad_id).view(B, 1, 1, T)
'''})

ADDITIVE_ATTENTION = Alternative("float_additive_mask_einsum", "01-attention", {
    "sdpa-code": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    d_k = q.shape[-1]
    scores = torch.einsum("...id,...jd->...ij", q, k) / math.sqrt(d_k)
    if mask is not None:
        # the float mask nn.Transformer adds: 0 where allowed, -inf where blocked
        float_mask = torch.zeros_like(scores).masked_fill(mask, float("-inf"))
        scores = scores + float_mask
    weights = torch.softmax(scores, dim=-1)
    return torch.einsum("...ij,...jd->...id", weights, v), weights
''',
    "mha-code": '''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        assert d_model % num_heads == 0, "d_model must be divisible by num_heads"
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, d_model)
        self.w_v = nn.Linear(d_model, d_model)
        self.w_o = nn.Linear(d_model, d_model)

    def forward(self, x_q, x_kv, mask=None):
        B, Tq, _ = x_q.shape
        Tk = x_kv.shape[1]
        h, d = self.num_heads, self.head_dim
        q = self.w_q(x_q).reshape(B, Tq, h, d).permute(0, 2, 1, 3)
        k = self.w_k(x_kv).reshape(B, Tk, h, d).permute(0, 2, 1, 3)
        v = self.w_v(x_kv).reshape(B, Tk, h, d).permute(0, 2, 1, 3)
        out, weights = scaled_dot_product_attention(q, k, v, mask=mask)
        self.attention_weights = weights.detach()
        out = out.permute(0, 2, 1, 3).reshape(B, Tq, h * d)
        return self.w_o(out)
''',
    "masks-code": '''
def causal_mask(T):
    # nn.Transformer.generate_square_subsequent_mask's float mask, read as booleans
    float_mask = torch.triu(torch.full((T, T), float("-inf")), diagonal=1)
    return float_mask == float("-inf")


def padding_mask(tokens, pad_id):
    return tokens.eq(pad_id)[:, None, None, :]
'''})


# -- 02-layers, ported -----------------------------------------------------------------------------
ANNOTATED_LAYERS = Alternative("annotated_sublayer_clones_norm_alias", "02-layers", {
    "positions-code": '''
def positional_encoding(T, d_model):
    "Implement the PE function."
    pe = torch.zeros(T, d_model)
    position = torch.arange(0, T).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe
''',
    "ffn-code": '''
class FeedForward(nn.Module):
    "Implements FFN equation."

    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.linear2(self.dropout(self.linear1(x).relu()))
''',
    "encoder-code": '''
class EncoderLayer(nn.Module):
    "Encoder is made up of self-attn and feed forward (defined below)"

    def __init__(self, d_model, num_heads, d_ff, dropout):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.sublayer = clones(SublayerConnection(d_model, dropout), 2)
        self.norm1, self.norm2 = self.sublayer[0].norm, self.sublayer[1].norm
        self.size = d_model

    def forward(self, x, mask=None):
        "Follow Figure 1 (left) for connections."
        x = self.sublayer[0](x, lambda x: self.self_attn(x, x, mask))
        return self.sublayer[1](x, self.ffn)
''',
    "decoder-code": '''
class DecoderLayer(nn.Module):
    "Decoder is made of self-attn, src-attn, and feed forward (defined below)"

    def __init__(self, d_model, num_heads, d_ff, dropout):
        super().__init__()
        self.size = d_model
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.cross_attn = MultiHeadAttention(d_model, num_heads)
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.sublayer = clones(SublayerConnection(d_model, dropout), 3)
        self.norm1 = self.sublayer[0].norm
        self.norm2 = self.sublayer[1].norm
        self.norm3 = self.sublayer[2].norm

    def forward(self, y, memory, self_mask=None, memory_mask=None):
        "Follow Figure 1 (right) for connections."
        m = memory
        y = self.sublayer[0](y, lambda y: self.self_attn(y, y, self_mask))
        y = self.sublayer[1](y, lambda y: self.cross_attn(y, m, memory_mask))
        return self.sublayer[2](y, self.ffn)
''',
    "classifier-code": '''
class EncoderClassifier(nn.Module):
    def __init__(self, vocab_size, num_classes, d_model, num_heads, num_layers, d_ff,
                 dropout=0.1, pad_id=0, max_len=64):
        super().__init__()
        self.pad_id = pad_id
        self.embed = nn.Sequential(Embeddings(d_model, vocab_size),
                                   PositionalEncoding(d_model, dropout, max_len))
        self.embedding = self.embed[0].lut
        self.layers = clones(EncoderLayer(d_model, num_heads, d_ff, dropout), num_layers)
        self.head = nn.Linear(d_model, num_classes)
        # Initialize parameters with Glorot / fan_avg.
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def forward(self, tokens):
        mask = padding_mask(tokens, self.pad_id)
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x, mask)
        keep = (~mask)[:, 0, 0, :, None].to(x.dtype)            # [B, T, 1]
        pooled = (x * keep).sum(1) / keep.sum(1)
        return F.log_softmax(self.head(pooled), dim=-1)
'''}, added={"encoder-code": '''
import copy


def clones(module, N):
    "Produce N identical layers."
    return nn.ModuleList([copy.deepcopy(module) for _ in range(N)])


class SublayerConnection(nn.Module):
    """
    A residual connection followed by a layer norm (post-norm, as in the paper).
    """

    def __init__(self, size, dropout):
        super().__init__()
        self.norm = nn.LayerNorm(size)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, sublayer):
        "Apply residual connection to any sublayer with the same size."
        return self.norm(x + self.dropout(sublayer(x)))
''', "classifier-code": '''
class Embeddings(nn.Module):
    def __init__(self, d_model, vocab):
        super().__init__()
        self.lut = nn.Embedding(vocab, d_model)
        self.d_model = d_model

    def forward(self, x):
        return self.lut(x) * math.sqrt(self.d_model)


class PositionalEncoding(nn.Module):
    "Implement the PE function."

    def __init__(self, d_model, dropout, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        self.register_buffer("pe", positional_encoding(max_len, d_model).unsqueeze(0))

    def forward(self, x):
        x = x + self.pe[:, : x.size(1)].requires_grad_(False)
        return self.dropout(x)
'''})

ADDNORM_LAYERS = Alternative("addnorm_sequential_alias_functional_layer_norm", "02-layers", {
    "positions-code": '''
def positional_encoding(T, d_model):
    P = torch.zeros((T, d_model))
    X = torch.arange(T, dtype=torch.float32).reshape(-1, 1) / torch.pow(
        10000, torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    P[:, 0::2] = torch.sin(X)
    P[:, 1::2] = torch.cos(X)
    return P
''',
    "ffn-code": '''
class FeedForward(nn.Module):
    """The positionwise feed-forward network."""

    def __init__(self, d_model, d_ff, activation=nn.ReLU):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_model, d_ff), activation(), nn.Linear(d_ff, d_model))
        self.linear1, self.linear2 = self.net[0], self.net[2]    # the names the notebook asks for

    def forward(self, x):
        return self.net(x)
''',
    "encoder-code": '''
class EncoderLayer(nn.Module):
    """The Transformer encoder block."""

    def __init__(self, d_model, num_heads, d_ff, dropout):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.addnorm1 = AddNorm(d_model, dropout)
        self.ffn = FeedForward(d_model, d_ff, activation=nn.ReLU)
        self.addnorm2 = AddNorm(d_model, dropout)
        self.norm1, self.norm2 = self.addnorm1.ln, self.addnorm2.ln

    def forward(self, x, mask=None):
        Y = self.addnorm1(x, self.self_attn(x, x, mask))
        return self.addnorm2(Y, self.ffn(Y))
''',
    "decoder-code": '''
class DecoderLayer(nn.Module):
    """The Transformer decoder block."""

    def __init__(self, d_model, num_heads, d_ff, dropout):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.addnorm1 = AddNorm(d_model, dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads)
        self.addnorm2 = AddNorm(d_model, dropout)
        self.ffn = FeedForward(d_model, d_ff, activation=nn.ReLU)
        self.addnorm3 = AddNorm(d_model, dropout)
        self.norm1, self.norm2, self.norm3 = self.addnorm1.ln, self.addnorm2.ln, self.addnorm3.ln

    def forward(self, y, memory, self_mask=None, memory_mask=None):
        X2 = self.self_attn(y, y, self_mask)
        Y = self.addnorm1(y, X2)
        Y2 = self.cross_attn(Y, memory, memory_mask)
        Z = self.addnorm2(Y, Y2)
        return self.addnorm3(Z, self.ffn(Z))
''',
    "classifier-code": '''
class EncoderClassifier(nn.Module):
    """The Transformer encoder with a pooled classification head."""

    def __init__(self, vocab_size, num_classes, d_model, num_heads, num_layers, d_ff,
                 dropout=0.1, pad_id=0, max_len=64):
        super().__init__()
        self.num_hiddens, self.pad_id = d_model, pad_id
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList()
        for i in range(num_layers):
            self.layers.append(EncoderLayer(d_model, num_heads, d_ff, dropout))
        self.head = nn.Linear(d_model, num_classes)

    def forward(self, tokens):
        # Since positional encoding values are between -1 and 1, the embedding values are
        # multiplied by the square root of the embedding dimension to rescale before they are summed
        P = positional_encoding(tokens.shape[1], self.num_hiddens).to(tokens.device)
        X = self.dropout(self.embedding(tokens) * math.sqrt(self.num_hiddens) + P)
        valid = tokens != self.pad_id                                   # [B, T]
        for blk in self.layers:
            X = blk(X, ~valid[:, None, None, :])
        lengths = valid.sum(dim=1, keepdim=True)
        pooled = torch.where(valid[..., None], X, torch.zeros_like(X)).sum(dim=1) / lengths
        return self.head(pooled).log_softmax(dim=-1)
'''}, added={"encoder-code": '''
class LayerNorm(nn.Module):
    """Layer normalization over the last axis, with a learnt gain and bias (as nn.LayerNorm)."""

    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))
        self.eps = eps

    def forward(self, x):
        return nn.functional.layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.eps)


class AddNorm(nn.Module):
    """The residual connection followed by layer normalization."""

    def __init__(self, d_model, dropout):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.ln = LayerNorm(d_model)

    def forward(self, X, Y):
        return self.ln(self.dropout(Y) + X)
'''})

NANOGPT_LAYERS = Alternative("nanogpt_block_moduledict_alias", "02-layers", {
    "positions-code": '''
def positional_encoding(T, d_model):
    pos = torch.arange(T, dtype=torch.float32)[:, None]
    dim = torch.arange(d_model)[None, :]
    angle = pos / torch.pow(10000.0, (dim - dim % 2) / d_model)
    return torch.where(dim % 2 == 0, torch.sin(angle), torch.cos(angle))
''',
    "ffn-code": '''
class FeedForward(nn.Module):

    def __init__(self, d_model, d_ff):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.relu = nn.ReLU()
        self.linear2 = nn.Linear(d_ff, d_model)

    def forward(self, x):
        x = self.linear1(x)
        x = self.relu(x)
        x = self.linear2(x)
        return x
''',
    "encoder-code": '''
class EncoderLayer(nn.Module):

    def __init__(self, d_model, num_heads, d_ff, dropout):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.norm2 = nn.LayerNorm(d_model)
        self.ffn = FeedForward(d_model, d_ff)
        self.resid_dropout = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        x = self.norm1(x + self.resid_dropout(self.self_attn(x, x, mask=mask)))
        x = self.norm2(x + self.resid_dropout(self.ffn(x)))
        return x
''',
    "decoder-code": '''
class DecoderLayer(nn.Module):

    def __init__(self, d_model, num_heads, d_ff, dropout):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.norm2 = nn.LayerNorm(d_model)
        self.cross_attn = MultiHeadAttention(d_model, num_heads)
        self.norm3 = nn.LayerNorm(d_model)
        self.ffn = FeedForward(d_model, d_ff)
        self.resid_dropout = nn.Dropout(dropout)

    def forward(self, y, memory, self_mask=None, memory_mask=None):
        y = self.norm1(y + self.resid_dropout(self.self_attn(y, y, mask=self_mask)))
        y = self.norm2(y + self.resid_dropout(self.cross_attn(y, memory, mask=memory_mask)))
        y = self.norm3(y + self.resid_dropout(self.ffn(y)))
        return y
''',
    "classifier-code": '''
class EncoderClassifier(nn.Module):

    def __init__(self, vocab_size, num_classes, d_model, num_heads, num_layers, d_ff,
                 dropout=0.1, pad_id=0, max_len=64):
        super().__init__()
        self.pad_id, self.n_embd = pad_id, d_model
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab_size, d_model),
            drop=nn.Dropout(dropout),
            h=nn.ModuleList([EncoderLayer(d_model, num_heads, d_ff, dropout)
                             for _ in range(num_layers)]),
        ))
        self.head = nn.Linear(d_model, num_classes)
        # the names the notebook asks for
        self.embedding, self.layers = self.transformer.wte, self.transformer.h
        self.register_buffer("wpe", positional_encoding(max_len, d_model), persistent=False)

    def forward(self, tokens):
        b, t = tokens.size()
        tok_emb = self.transformer.wte(tokens) * math.sqrt(self.n_embd)  # (b, t, n_embd)
        x = self.transformer.drop(tok_emb + self.wpe[:t])
        pad = padding_mask(tokens, self.pad_id)
        for block in self.transformer.h:
            x = block(x, pad)
        real = (tokens != self.pad_id).to(x.dtype)
        pooled = (x * real[..., None]).sum(1) / real.sum(1, keepdim=True)
        return F.log_softmax(self.head(pooled), dim=-1)
'''})


# -- 03-sorting, ported ----------------------------------------------------------------------------
NANOGPT_SORTING = Alternative("nanogpt_lm_head_first_tied_tril_buffer", "03-sorting", {
    "model-code": '''
class Transformer(nn.Module):
    def __init__(self, vocab_size, d_model=32, num_heads=4, num_layers=2, d_ff=128, dropout=0.1,
                 max_len=64):
        super().__init__()
        self.n_embd = d_model
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.embedding = nn.Embedding(vocab_size, d_model)
        # with weight tying: https://paperswithcode.com/method/weight-tying
        self.embedding.weight = self.lm_head.weight
        self.encoder = nn.ModuleList([EncoderLayer(d_model, num_heads, d_ff, dropout)
                                      for _ in range(num_layers)])
        self.decoder = nn.ModuleList([DecoderLayer(d_model, num_heads, d_ff, dropout)
                                      for _ in range(num_layers)])
        self.drop = nn.Dropout(dropout)
        self.register_buffer("wpe", positional_encoding(max_len, d_model), persistent=False)
        # causal mask to ensure that attention is only applied to the left in the input sequence
        self.register_buffer("bias", torch.tril(torch.ones(max_len, max_len))
                             .view(1, 1, max_len, max_len), persistent=False)

    def embed(self, tokens):
        b, t = tokens.size()
        tok_emb = self.embedding(tokens) * math.sqrt(self.n_embd)  # token embeddings (b, t, n_embd)
        return self.drop(tok_emb + self.wpe[:t])

    def encode(self, src, src_mask=None):
        x = self.embed(src)
        for block in self.encoder:
            x = block(x, src_mask)
        return x

    def decode(self, tgt_in, memory, memory_mask=None):
        t = tgt_in.size(1)
        future = self.bias[:, :, :t, :t] == 0
        x = self.embed(tgt_in)
        for block in self.decoder:
            x = block(x, memory, future, memory_mask)
        return self.lm_head(x)

    def forward(self, src, tgt_in):
        return self.decode(tgt_in, self.encode(src))
''',
    "schedule-code": '''
def noam_rate(step, d_model, warmup):
    # 1) linear warmup for warmup steps
    if step < warmup:
        return d_model ** -0.5 * step * warmup ** -1.5
    # 2) then inverse square root decay
    return (d_model * step) ** -0.5
''',
    "teacher-code": '''
def shift_right(y, bos):
    b, t = y.size()
    start = torch.full((b, 1), bos, dtype=y.dtype, device=y.device)
    return torch.cat((start, y[:, :-1]), dim=1)


def smoothing_floor(eps, vocab_size):
    q = torch.full((vocab_size,), eps / vocab_size, dtype=torch.float64)
    q[0] += 1.0 - eps
    return torch.special.entr(q).sum().item()
''',
    "greedy-code": '''
@torch.no_grad()
def greedy_decode(model, src, bos, length=None):
    max_new_tokens = src.size(1) if length is None else length
    memory = model.encode(src)
    idx = torch.full((src.size(0), 1), bos, dtype=torch.long, device=src.device)
    for _ in range(max_new_tokens):
        # forward the model to get the logits for the index in the sequence
        logits = model.decode(idx, memory)
        # pluck the logits at the final step
        logits = logits[:, -1, :]
        logits[:, bos] = -float("Inf")
        # take the single most likely token
        _, idx_next = torch.topk(logits, k=1, dim=-1)
        # append it to the running sequence and continue
        idx = torch.cat((idx, idx_next), dim=1)
    return idx[:, 1:]
'''}, train=True)

ANNOTATED_SORTING = Alternative("annotated_generator_first_embeddings_alias", "03-sorting", {
    "model-code": '''
class Transformer(nn.Module):
    """
    A standard Encoder-Decoder architecture. Base for this and many other models.
    """

    def __init__(self, vocab_size, d_model=32, num_heads=4, num_layers=2, d_ff=128, dropout=0.1,
                 max_len=64):
        super().__init__()
        self.generator = Generator(d_model, vocab_size)
        self.src_embed = nn.Sequential(Embeddings(d_model, vocab_size),
                                       PositionalEncoding(d_model, dropout, max_len))
        self.tgt_embed = self.src_embed                       # one embedding for both sides...
        self.embedding = self.src_embed[0].lut
        self.generator.proj.weight = self.embedding.weight    # ... and for the output
        self.encoder = clones(EncoderLayer(d_model, num_heads, d_ff, dropout), num_layers)
        self.decoder = clones(DecoderLayer(d_model, num_heads, d_ff, dropout), num_layers)
        # Initialize parameters with Glorot / fan_avg.
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def embed(self, tokens):
        return self.src_embed(tokens)

    def encode(self, src, src_mask=None):
        x = self.src_embed(src)
        for layer in self.encoder:
            x = layer(x, src_mask)
        return x

    def decode(self, tgt_in, memory, memory_mask=None):
        tgt_mask = causal_mask(tgt_in.size(-1)).to(tgt_in.device)
        x = self.tgt_embed(tgt_in)
        for layer in self.decoder:
            x = layer(x, memory, tgt_mask, memory_mask)
        return self.generator(x)

    def forward(self, src, tgt_in):
        "Take in and process masked src and target sequences."
        return self.decode(tgt_in, self.encode(src))
''',
    "schedule-code": '''
def noam_rate(step, d_model, warmup, factor=1.0):
    """
    we have to default the step to 1 for LambdaLR function
    to avoid zero raising to negative power.
    """
    if step == 0:
        step = 1
    return factor * (d_model ** (-0.5) * min(step ** (-0.5), step * warmup ** (-1.5)))
''',
    "teacher-code": '''
def shift_right(y, bos):
    start = y.new_full((y.size(0), 1), bos)
    return torch.cat([start, y], dim=1)[:, :-1]


def smoothing_floor(eps, vocab_size):
    true_dist = torch.full((1, vocab_size), eps / vocab_size, dtype=torch.float64)
    target = torch.zeros(1, 1, dtype=torch.long)
    true_dist.scatter_(1, target, 1.0 - eps + eps / vocab_size)
    return float(-torch.special.xlogy(true_dist, true_dist).sum())
''',
    "greedy-code": '''
def greedy_decode(model, src, bos, length=None):
    max_len = src.size(1) if length is None else length
    with torch.no_grad():
        memory = model.encode(src)
        ys = torch.zeros(src.size(0), 1).fill_(bos).type_as(src.data)
        for i in range(max_len):
            out = model.decode(ys, memory)
            prob = out[:, -1]
            prob[:, bos] = torch.finfo(prob.dtype).min
            _, next_word = torch.max(prob, dim=1)
            ys = torch.cat([ys, next_word.unsqueeze(1).type_as(src.data)], dim=1)
    return ys[:, 1:]
'''}, added={"model-code": '''
import copy


def clones(module, N):
    "Produce N identical layers."
    return nn.ModuleList([copy.deepcopy(module) for _ in range(N)])


class Embeddings(nn.Module):
    def __init__(self, d_model, vocab):
        super().__init__()
        self.lut = nn.Embedding(vocab, d_model)
        self.d_model = d_model

    def forward(self, x):
        return self.lut(x) * math.sqrt(self.d_model)


class PositionalEncoding(nn.Module):
    "Implement the PE function."

    def __init__(self, d_model, dropout, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        self.register_buffer("pe", positional_encoding(max_len, d_model).unsqueeze(0),
                             persistent=False)

    def forward(self, x):
        x = x + self.pe[:, : x.size(1)].requires_grad_(False)
        return self.dropout(x)


class Generator(nn.Module):
    "The output step: logits from the decoder's vectors (tied to the embedding, no bias)."

    def __init__(self, d_model, vocab):
        super().__init__()
        self.proj = nn.Linear(d_model, vocab, bias=False)

    def forward(self, x):
        return self.proj(x)
'''}, train=True)

# The Annotated Transformer's Generator as it is written there: log_softmax of the tied projection.
# Log-probabilities are the logits up to a constant per row (cross-entropy, argmax and greedy
# decoding do not tell them apart), which the contract accepts: it trains as the logits do.
GENERATOR = """
class Generator(nn.Module):
    "Define standard linear + softmax generation step."

    def __init__(self, d_model, vocab):
        super().__init__()
        self.proj = nn.Linear(d_model, vocab, bias=False)

    def forward(self, x):
        return F.log_softmax(self.proj(x), dim=-1)
"""
ANNOTATED_LOG_SOFTMAX = Alternative(
    "annotated_generator_log_softmax", "03-sorting", ANNOTATED_SORTING.answers,
    added={"model-code": ANNOTATED_SORTING.added["model-code"].split("\n\nclass Generator")[0]
           .rstrip("\n") + "\n\n" + GENERATOR}, train=True)

EINSUM_SORTING = Alternative("einsum_logits_extra_optional_args", "03-sorting", {
    "model-code": '''
class Transformer(nn.Module):
    def __init__(self, vocab_size, d_model=32, num_heads=4, num_layers=2, d_ff=128, dropout=0.1,
                 max_len=64):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.encoder = nn.ModuleList()
        self.decoder = nn.ModuleList()
        for _ in range(num_layers):
            self.encoder.append(EncoderLayer(d_model, num_heads, d_ff, dropout))
            self.decoder.append(DecoderLayer(d_model, num_heads, d_ff, dropout))
        self.dropout = nn.Dropout(dropout)
        self.scale = d_model ** 0.5
        self.register_buffer("pe", positional_encoding(max_len, d_model))

    def embed(self, tokens):
        return self.dropout(self.embedding(tokens) * self.scale + self.pe[: tokens.size(1)])

    def encode(self, src, src_mask=None):
        h = self.embed(src)
        for layer in self.encoder:
            h = layer(h, mask=src_mask)
        return h

    def decode(self, tgt_in, memory, memory_mask=None, tgt_mask=None):
        if tgt_mask is None:
            tgt_mask = causal_mask(tgt_in.size(1)).to(tgt_in.device)
        h = self.embed(tgt_in)
        for layer in self.decoder:
            h = layer(h, memory, self_mask=tgt_mask, memory_mask=memory_mask)
        return torch.einsum("btd,vd->btv", h, self.embedding.weight)

    def forward(self, src, tgt_in, src_mask=None):
        memory = self.encode(src, src_mask)
        return self.decode(tgt_in, memory, memory_mask=src_mask)
''',
    "schedule-code": '''
def noam_rate(step, d_model, warmup):
    return (d_model * step) ** -0.5 * min(1.0, (step / warmup) ** 1.5)
''',
    "teacher-code": '''
def shift_right(y, bos):
    out = y.new_full(y.shape, bos)
    out[:, 1:] = y[:, :-1]
    return out


def smoothing_floor(eps, vocab_size):
    # the loss of a model that predicts exactly the smoothed target
    q = torch.full((1, vocab_size), eps / vocab_size, dtype=torch.float64)
    q[0, 0] += 1 - eps
    loss = F.cross_entropy(q.log(), torch.tensor([0]), label_smoothing=eps)
    return loss.item()
''',
    "greedy-code": '''
def greedy_decode(model, src, bos, length=None):
    steps = src.size(1) if length is None else length
    with torch.no_grad():
        memory = model.encode(src)
        written = src.new_full((src.size(0), 1), bos)
        for _ in range(steps):
            logits = model.decode(written, memory)[:, -1]
            banned = torch.zeros(logits.size(-1), dtype=torch.bool, device=logits.device)
            banned[bos] = True
            choice = logits.masked_fill(banned, float("-inf")).argmax(dim=-1, keepdim=True)
            written = torch.cat([written, choice], dim=1)
    return written[:, 1:]
'''})

# jadore801120/attention-is-all-you-need-pytorch (Layers.py, SubLayers.py, Models.py), ported: the
# sublayers keep that project's names (slf_attn, enc_attn, pos_ffn, w_1, w_2, src_word_emb,
# layer_stack) with the contract's as aliases of the same modules, so the grader's stand-in in
# `self_attn` leaves the layer's own attention registered under `slf_attn`; a numpy sinusoid table,
# a PositionalEncoding buffer, residuals added in place, a NaN-masked nanmean for pooling.
JADORE_LAYERS = Alternative("jadore_names_aliased_numpy_table_nanmean", "02-layers", {
    "positions-code": '''
import numpy as np


def positional_encoding(T, d_model):
    n_position, d_hid = T, d_model

    def get_position_angle_vec(position):
        return [position / np.power(10000, 2 * (hid_j // 2) / d_hid) for hid_j in range(d_hid)]

    sinusoid_table = np.array([get_position_angle_vec(pos_i) for pos_i in range(n_position)])
    sinusoid_table[:, 0::2] = np.sin(sinusoid_table[:, 0::2])
    sinusoid_table[:, 1::2] = np.cos(sinusoid_table[:, 1::2])

    return torch.FloatTensor(sinusoid_table)
''',
    "ffn-code": '''
class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        d_in, d_hid = d_model, d_ff
        self.w_1 = nn.Linear(d_in, d_hid)
        self.w_2 = nn.Linear(d_hid, d_in)
        self.linear1, self.linear2 = self.w_1, self.w_2

    def forward(self, x):
        return self.w_2(F.relu(self.w_1(x)))
''',
    "encoder-code": '''
class EncoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.1):
        super(EncoderLayer, self).__init__()
        self.slf_attn = MultiHeadAttention(d_model, num_heads)
        self.pos_ffn = FeedForward(d_model, d_ff)
        self.self_attn, self.ffn = self.slf_attn, self.pos_ffn      # the notebook's names
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, enc_input, slf_attn_mask=None):
        residual = enc_input
        enc_output = self.self_attn(enc_input, enc_input, slf_attn_mask)
        enc_output = self.dropout(enc_output)
        enc_output += residual
        enc_output = self.norm1(enc_output)

        residual = enc_output
        enc_output = self.ffn(enc_output)
        enc_output = self.dropout(enc_output)
        enc_output += residual
        enc_output = self.norm2(enc_output)
        return enc_output
''',
    "decoder-code": '''
class DecoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.1):
        super(DecoderLayer, self).__init__()
        self.slf_attn = MultiHeadAttention(d_model, num_heads)
        self.enc_attn = MultiHeadAttention(d_model, num_heads)
        self.pos_ffn = FeedForward(d_model, d_ff)
        self.self_attn, self.cross_attn, self.ffn = self.slf_attn, self.enc_attn, self.pos_ffn
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, dec_input, enc_output, slf_attn_mask=None, dec_enc_attn_mask=None):
        residual = dec_input
        dec_output = self.dropout(self.self_attn(dec_input, dec_input, slf_attn_mask))
        dec_output += residual
        dec_output = self.norm1(dec_output)

        residual = dec_output
        dec_output = self.dropout(self.cross_attn(dec_output, enc_output, dec_enc_attn_mask))
        dec_output += residual
        dec_output = self.norm2(dec_output)

        residual = dec_output
        dec_output = self.dropout(self.ffn(dec_output))
        dec_output += residual
        dec_output = self.norm3(dec_output)
        return dec_output
''',
    "classifier-code": '''
class EncoderClassifier(nn.Module):
    def __init__(self, vocab_size, num_classes, d_model, num_heads, num_layers, d_ff,
                 dropout=0.1, pad_id=0, max_len=64, scale_emb=True):
        super().__init__()
        self.src_pad_idx = pad_id
        self.src_word_emb = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        self.position_enc = PositionalEncoding(d_model, n_position=max_len)
        self.dropout = nn.Dropout(p=dropout)
        self.layer_stack = nn.ModuleList([
            EncoderLayer(d_model, num_heads, d_ff, dropout=dropout)
            for _ in range(num_layers)])
        self.head = nn.Linear(d_model, num_classes)
        self.embedding, self.layers = self.src_word_emb, self.layer_stack
        self.scale_emb = scale_emb
        self.d_model = d_model

    def forward(self, tokens):
        src_mask = padding_mask(tokens, self.src_pad_idx)
        enc_output = self.src_word_emb(tokens)
        if self.scale_emb:
            enc_output *= self.d_model ** 0.5
        enc_output = self.dropout(self.position_enc(enc_output))
        for enc_layer in self.layer_stack:
            enc_output = enc_layer(enc_output, src_mask)
        pads = (tokens == self.src_pad_idx).unsqueeze(-1)
        pooled = enc_output.masked_fill(pads, float("nan")).nanmean(dim=1)
        return F.log_softmax(self.head(pooled), dim=-1)
''',
    "regressor-code": '''
class EncoderRegressor(nn.Module):
    def __init__(self, vocab_size, d_model, num_heads, num_layers, d_ff, dropout=0.1, pad_id=0,
                 max_len=64, scale_emb=True):
        super().__init__()
        self.src_pad_idx = pad_id
        self.src_word_emb = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        self.position_enc = PositionalEncoding(d_model, n_position=max_len)
        self.dropout = nn.Dropout(p=dropout)
        self.layer_stack = nn.ModuleList([
            EncoderLayer(d_model, num_heads, d_ff, dropout=dropout)
            for _ in range(num_layers)])
        self.head = nn.Linear(d_model, 1)
        self.embedding, self.layers = self.src_word_emb, self.layer_stack
        self.scale_emb = scale_emb
        self.d_model = d_model

    def forward(self, tokens):
        src_mask = padding_mask(tokens, self.src_pad_idx)
        enc_output = self.src_word_emb(tokens)
        if self.scale_emb:
            enc_output *= self.d_model ** 0.5
        enc_output = self.dropout(self.position_enc(enc_output))
        for enc_layer in self.layer_stack:
            enc_output = enc_layer(enc_output, src_mask)
        pads = (tokens == self.src_pad_idx).unsqueeze(-1)
        pooled = enc_output.masked_fill(pads, float("nan")).nanmean(dim=1)
        return self.head(pooled).view(-1)
''',
}, added={
    "classifier-code": '''
class PositionalEncoding(nn.Module):
    def __init__(self, d_hid, n_position=200):
        super(PositionalEncoding, self).__init__()

        self.register_buffer('pos_table', positional_encoding(n_position, d_hid).unsqueeze(0))

    def forward(self, x):
        return x + self.pos_table[:, :x.size(1)].clone().detach()
''',
})

PORTS = [ANNOTATED_ATTENTION, NANOGPT_ATTENTION, ADDITIVE_ATTENTION, ANNOTATED_LAYERS,
         ADDNORM_LAYERS, NANOGPT_LAYERS, JADORE_LAYERS, NANOGPT_SORTING, ANNOTATED_SORTING,
         ANNOTATED_LOG_SOFTMAX, EINSUM_SORTING]
ALTERNATIVES = [EINSUM, HELPERS, SUBLAYERS, FUNCTIONAL, LINEAR, SCALED, *PORTS]


# -- the 02-layers regressor, in other styles ------------------------------------------------------
# These give only the regressor's answer cell; the other answer cells get the course's solution.
REGRESSOR_MASKED_FILL = Alternative("regressor_masked_fill_count_positions_per_call", "02-layers", {
    "regressor-code": '''
class EncoderRegressor(nn.Module):
    def __init__(self, vocab_size, d_model, num_heads, num_layers, d_ff, dropout=0.1, pad_id=0,
                 max_len=64):
        super().__init__()
        self.pad_id, self.scale = pad_id, math.sqrt(d_model)
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.layers = nn.ModuleList()
        for _ in range(num_layers):
            self.layers.append(EncoderLayer(d_model, num_heads, d_ff, dropout))
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(d_model, 1)

    def forward(self, tokens):
        pads = tokens == self.pad_id
        positions = positional_encoding(tokens.shape[1], self.embedding.embedding_dim)
        x = self.dropout(self.embedding(tokens) * self.scale + positions)
        for layer in self.layers:
            x = layer(x, mask=pads[:, None, None, :])
        x = x.masked_fill(pads.unsqueeze(-1), 0.0)
        pooled = x.sum(1) / (~pads).sum(1, keepdim=True)
        return self.head(pooled).view(-1)
'''})

REGRESSOR_MATMUL = Alternative("regressor_matmul_pooling_functional_dropout", "02-layers", {
    "regressor-code": '''
class EncoderRegressor(nn.Module):
    def __init__(self, vocab_size, d_model, num_heads, num_layers, d_ff, dropout=0.1, pad_id=0,
                 max_len=64):
        super().__init__()
        self.pad_id, self.d_model, self.p = pad_id, d_model, dropout
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.register_buffer("pe", positional_encoding(max_len, d_model))
        self.layers = nn.ModuleList([EncoderLayer(d_model, num_heads, d_ff, dropout)
                                     for _ in range(num_layers)])
        self.head = nn.Linear(d_model, 1)

    def forward(self, tokens):
        x = self.embedding(tokens) * self.d_model ** 0.5 + self.pe[: tokens.size(1)]
        x = F.dropout(x, self.p, self.training)
        mask = padding_mask(tokens, self.pad_id)
        for layer in self.layers:
            x = layer(x, mask)
        weights = (tokens != self.pad_id).float()
        weights = weights / weights.sum(1, keepdim=True)
        pooled = (weights.unsqueeze(1) @ x).squeeze(1)      # [B, 1, T] @ [B, T, d] -> [B, d]
        return self.head(pooled)[:, 0]
'''})

ALTERNATIVES += [REGRESSOR_MASKED_FILL, REGRESSOR_MATMUL]


# -- the 02-layers heads, ported (issue 23) --------------------------------------------------------
# The layout of PyTorch's tutorial "Language modeling with nn.Transformer": sequence-first tensors
# (src.t()), a PositionalEncoding module that builds its own table with exp and log (no call to
# positional_encoding: graded against the real table) and applies the dropout, init_weights, and
# that tutorial's names (encoder for the embedding, transformer_encoder, decoder for the head) with
# the contract's as aliases; pooled the sentence-transformers way: an attention_mask of 1 on the
# real tokens, expanded to the hidden size, the sum divided by its clamp(min=1e-9).
TUTORIAL_HEADS = Alternative("tutorial_seq_first_sbert_mean_pooling", "02-layers", {
    "classifier-code": '''
class EncoderClassifier(nn.Module):
    def __init__(self, vocab_size, num_classes, d_model, num_heads, num_layers, d_ff,
                 dropout=0.1, pad_id=0, max_len=64):
        super().__init__()
        self.model_type = "Transformer"
        self.pad_id = pad_id
        self.pos_encoder = PositionalEncoding(d_model, dropout, max_len)
        self.transformer_encoder = nn.ModuleList(
            [EncoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)])
        self.encoder = nn.Embedding(vocab_size, d_model)
        self.d_model = d_model
        self.decoder = nn.Linear(d_model, num_classes)
        self.embedding, self.head = self.encoder, self.decoder         # the notebook's names
        self.layers = self.transformer_encoder
        self.init_weights()

    def init_weights(self):
        initrange = 0.1
        self.encoder.weight.data.uniform_(-initrange, initrange)
        self.decoder.bias.data.zero_()
        self.decoder.weight.data.uniform_(-initrange, initrange)

    def forward(self, src):
        attention_mask = (src != self.pad_id).long()
        src_key_padding_mask = padding_mask(src, self.pad_id)
        src = self.encoder(src.t()) * math.sqrt(self.d_model)        # [T, B, d_model]
        src = self.pos_encoder(src)
        output = src.transpose(0, 1)                                  # the layers: [B, T, d_model]
        for mod in self.transformer_encoder:
            output = mod(output, src_key_padding_mask)
        sentence_embeddings = mean_pooling(output, attention_mask)
        return F.log_softmax(self.decoder(sentence_embeddings), dim=-1)
''',
    "regressor-code": '''
class EncoderRegressor(nn.Module):
    def __init__(self, vocab_size, d_model, num_heads, num_layers, d_ff, dropout=0.1, pad_id=0,
                 max_len=64):
        super().__init__()
        self.model_type = "Transformer"
        self.pad_id = pad_id
        self.pos_encoder = PositionalEncoding(d_model, dropout, max_len)
        self.transformer_encoder = nn.ModuleList(
            [EncoderLayer(d_model, num_heads, d_ff, dropout) for _ in range(num_layers)])
        self.encoder = nn.Embedding(vocab_size, d_model)
        self.d_model = d_model
        self.decoder = nn.Linear(d_model, 1)
        self.embedding, self.head = self.encoder, self.decoder         # the notebook's names
        self.layers = self.transformer_encoder
        self.init_weights()

    def init_weights(self):
        initrange = 0.1
        self.encoder.weight.data.uniform_(-initrange, initrange)
        self.decoder.bias.data.zero_()
        self.decoder.weight.data.uniform_(-initrange, initrange)

    def forward(self, src):
        attention_mask = (src != self.pad_id).long()
        src_key_padding_mask = padding_mask(src, self.pad_id)
        src = self.encoder(src.t()) * math.sqrt(self.d_model)
        src = self.pos_encoder(src)
        output = src.transpose(0, 1)
        for mod in self.transformer_encoder:
            output = mod(output, src_key_padding_mask)
        sentence_embeddings = mean_pooling(output, attention_mask)
        return self.decoder(sentence_embeddings).squeeze(dim=1)
'''}, added={"classifier-code": '''
class PositionalEncoding(nn.Module):

    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        """x: [seq_len, batch_size, embedding_dim]"""
        x = x + self.pe[:x.size(0)]
        return self.dropout(x)


def mean_pooling(token_embeddings, attention_mask):
    """The mean of the token embeddings over the real tokens (attention_mask 1)."""
    input_mask_expanded = attention_mask.unsqueeze(-1).expand(token_embeddings.size()).float()
    return torch.sum(token_embeddings * input_mask_expanded, 1) / torch.clamp(
        input_mask_expanded.sum(1), min=1e-9)
'''})

PORTS += [TUTORIAL_HEADS]
ALTERNATIVES += [TUTORIAL_HEADS]


# -- the 02-layers encoder stacks, ported (h11-review) ---------------------------------------------
# d2l.ai's Transformer chapter (11.7): PositionWiseFFN (dense1, relu, dense2, renamed linear1 and
# linear2), AddNorm (ln(dropout(Y) + X); here a subclass of nn.LayerNorm, so that its weights are
# norm1.weight as the contract names them), TransformerEncoderBlock as EncoderLayer, the blocks in
# an nn.Sequential filled with add_module, d2l's PositionalEncoding (its table P a plain attribute,
# not a buffer, X / 10000^(2i/d), the dropout inside), and valid_lens (the count of real tokens)
# turned into the course's mask the way d2l's sequence_mask builds it, with arange < valid_len
# (which assumes the pads come last, as in the course's data and in every check).
D2L_STACK = Alternative("d2l_addnorm_valid_lens_sequential", "02-layers", {
    "ffn-code": '''
class FeedForward(nn.Module):
    """The positionwise feed-forward network."""
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.relu = nn.ReLU()
        self.linear2 = nn.Linear(d_ff, d_model)

    def forward(self, X):
        return self.linear2(self.relu(self.linear1(X)))
''',
    "encoder-code": '''
class EncoderLayer(nn.Module):
    """The Transformer encoder block."""
    def __init__(self, d_model, num_heads, d_ff, dropout):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.norm1 = AddNorm(d_model, dropout)
        self.ffn = FeedForward(d_model, d_ff)
        self.norm2 = AddNorm(d_model, dropout)

    def forward(self, X, mask=None):
        Y = self.norm1(X, self.self_attn(X, X, mask))
        return self.norm2(Y, self.ffn(Y))
''',
    "classifier-code": '''
class EncoderClassifier(nn.Module):
    def __init__(self, vocab_size, num_classes, d_model, num_heads, num_layers, d_ff,
                 dropout=0.1, pad_id=0, max_len=64):
        super().__init__()
        self.num_hiddens, self.pad_id = d_model, pad_id
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.pos_encoding = PositionalEncoding(d_model, dropout, max_len)
        self.layers = nn.Sequential()
        for i in range(num_layers):
            self.layers.add_module(str(i), EncoderLayer(d_model, num_heads, d_ff, dropout))
        self.head = nn.Linear(d_model, num_classes)

    def forward(self, X):
        valid_lens = (X != self.pad_id).sum(dim=1)
        mask = ~sequence_mask(valid_lens, X.shape[1])[:, None, None, :]
        X = self.pos_encoding(self.embedding(X) * math.sqrt(self.num_hiddens))
        for i, blk in enumerate(self.layers):
            X = blk(X, mask)
        return F.log_softmax(self.head(masked_mean(X, valid_lens)), dim=-1)
''',
    "regressor-code": '''
class EncoderRegressor(nn.Module):
    def __init__(self, vocab_size, d_model, num_heads, num_layers, d_ff, dropout=0.1, pad_id=0,
                 max_len=64):
        super().__init__()
        self.num_hiddens, self.pad_id = d_model, pad_id
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.pos_encoding = PositionalEncoding(d_model, dropout, max_len)
        self.layers = nn.Sequential()
        for i in range(num_layers):
            self.layers.add_module(str(i), EncoderLayer(d_model, num_heads, d_ff, dropout))
        self.head = nn.Linear(d_model, 1)

    def forward(self, X):
        valid_lens = (X != self.pad_id).sum(dim=1)
        mask = ~sequence_mask(valid_lens, X.shape[1])[:, None, None, :]
        X = self.pos_encoding(self.embedding(X) * math.sqrt(self.num_hiddens))
        for i, blk in enumerate(self.layers):
            X = blk(X, mask)
        return self.head(masked_mean(X, valid_lens)).reshape(-1)
'''}, added={"encoder-code": '''
class AddNorm(nn.LayerNorm):
    """The residual connection followed by layer normalization."""
    def __init__(self, norm_shape, dropout):
        super().__init__(norm_shape)
        self.dropout = nn.Dropout(dropout)

    def forward(self, X, Y):
        return super().forward(self.dropout(Y) + X)
''', "classifier-code": '''
class PositionalEncoding(nn.Module):
    """Positional encoding."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        # Create a long enough P
        self.P = torch.zeros((1, max_len, num_hiddens))
        X = torch.arange(max_len, dtype=torch.float32).reshape(
            -1, 1) / torch.pow(10000, torch.arange(
            0, num_hiddens, 2, dtype=torch.float32) / num_hiddens)
        self.P[:, :, 0::2] = torch.sin(X)
        self.P[:, :, 1::2] = torch.cos(X)

    def forward(self, X):
        X = X + self.P[:, :X.shape[1], :].to(X.device)
        return self.dropout(X)


def sequence_mask(valid_len, maxlen):
    """True at the first valid_len positions of each row."""
    return torch.arange(maxlen, dtype=torch.float32)[None, :] < valid_len[:, None]


def masked_mean(X, valid_lens):
    """The mean of X [B, T, d] over the first valid_lens positions of each row."""
    weights = sequence_mask(valid_lens, X.shape[1]).to(X.dtype)
    return (X * weights.unsqueeze(-1)).sum(dim=1) / valid_lens.unsqueeze(-1).to(X.dtype)
'''})

# Hugging Face's BERT layout: FeedForward as BertIntermediate's dense and activation (ACT2FN) and
# BertOutput's dense; EncoderLayer as BertLayer with BertSelfOutput and BertOutput as methods (the
# residual add and the LayerNorm, BERT's eps 1e-12; their dense is the attention's w_o and the
# feed-forward's second linear); the heads as BertForSequenceClassification: an embedding with
# padding_idx, position_ids in a buffer looking up a fixed table, get_extended_attention_mask's
# additive mask (0 or the dtype's minimum) turned into the course's bool mask, a mean pooler in
# BertPooler's place (no CLS token here), and the classifier's dropout before its head.
BERT_STACK = Alternative("hf_bert_extended_mask_mean_pooler", "02-layers", {
    "ffn-code": '''
class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, hidden_act="relu"):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)          # BertIntermediate.dense
        self.intermediate_act_fn = ACT2FN[hidden_act]
        self.linear2 = nn.Linear(d_ff, d_model)          # BertOutput.dense

    def forward(self, hidden_states):
        hidden_states = self.intermediate_act_fn(self.linear1(hidden_states))
        return self.linear2(hidden_states)
''',
    "encoder-code": '''
class EncoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout, layer_norm_eps=1e-12):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)    # BertSelfOutput.LayerNorm
        self.ffn = FeedForward(d_model, d_ff)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)    # BertOutput.LayerNorm
        self.hidden_dropout = nn.Dropout(dropout)

    def self_output(self, hidden_states, input_tensor):
        hidden_states = self.hidden_dropout(hidden_states)
        return self.norm1(hidden_states + input_tensor)

    def output(self, hidden_states, input_tensor):
        hidden_states = self.hidden_dropout(hidden_states)
        return self.norm2(hidden_states + input_tensor)

    def forward(self, hidden_states, attention_mask=None):
        self_outputs = self.self_attn(hidden_states, hidden_states, attention_mask)
        attention_output = self.self_output(self_outputs, hidden_states)
        intermediate_output = self.ffn(attention_output)
        layer_output = self.output(intermediate_output, attention_output)
        return layer_output
''',
    "classifier-code": '''
class EncoderClassifier(nn.Module):
    def __init__(self, vocab_size, num_classes, d_model, num_heads, num_layers, d_ff,
                 dropout=0.1, pad_id=0, max_len=64):
        super().__init__()
        self.num_labels, self.pad_token_id, self.hidden_size = num_classes, pad_id, d_model
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        self.register_buffer("position_ids", torch.arange(max_len).expand((1, -1)),
                             persistent=False)
        self.register_buffer("position_table", positional_encoding(max_len, d_model),
                             persistent=False)
        self.embeddings_dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList([EncoderLayer(d_model, num_heads, d_ff, dropout)
                                     for _ in range(num_layers)])
        self.pooler = MeanPooler()
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(d_model, num_classes)

    def forward(self, input_ids):
        attention_mask = (input_ids != self.pad_token_id).long()
        extended_attention_mask = get_extended_attention_mask(attention_mask)
        seq_length = input_ids.shape[1]
        position_ids = self.position_ids[:, :seq_length]
        inputs_embeds = self.embedding(input_ids) * math.sqrt(self.hidden_size)
        hidden_states = inputs_embeds + self.position_table[position_ids]
        hidden_states = self.embeddings_dropout(hidden_states)
        for layer_module in self.layers:
            hidden_states = layer_module(hidden_states, extended_attention_mask < 0)
        pooled_output = self.dropout(self.pooler(hidden_states, attention_mask))
        logits = self.head(pooled_output)
        return F.log_softmax(logits, dim=-1)
''',
    "regressor-code": '''
class EncoderRegressor(nn.Module):
    def __init__(self, vocab_size, d_model, num_heads, num_layers, d_ff, dropout=0.1, pad_id=0,
                 max_len=64):
        super().__init__()
        self.pad_token_id, self.hidden_size = pad_id, d_model
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        self.register_buffer("position_ids", torch.arange(max_len).expand((1, -1)),
                             persistent=False)
        self.register_buffer("position_table", positional_encoding(max_len, d_model),
                             persistent=False)
        self.embeddings_dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList([EncoderLayer(d_model, num_heads, d_ff, dropout)
                                     for _ in range(num_layers)])
        self.pooler = MeanPooler()
        self.head = nn.Linear(d_model, 1)

    def forward(self, input_ids):
        attention_mask = (input_ids != self.pad_token_id).long()
        extended_attention_mask = get_extended_attention_mask(attention_mask)
        position_ids = self.position_ids[:, :input_ids.shape[1]]
        hidden_states = self.embedding(input_ids) * math.sqrt(self.hidden_size)
        hidden_states = self.embeddings_dropout(hidden_states + self.position_table[position_ids])
        for layer_module in self.layers:
            hidden_states = layer_module(hidden_states, extended_attention_mask < 0)
        logits = self.head(self.pooler(hidden_states, attention_mask))
        return logits.view(-1)
'''}, added={"ffn-code": '''
ACT2FN = {"relu": F.relu, "gelu": F.gelu}
''', "classifier-code": '''
def get_extended_attention_mask(attention_mask, dtype=torch.float32):
    """attention_mask [B, T] (1 on real tokens) -> [B, 1, 1, T]: 0 to keep, a large negative
    number to block, as BERT adds it to the attention scores."""
    extended_attention_mask = attention_mask[:, None, None, :].to(dtype=dtype)
    return (1.0 - extended_attention_mask) * torch.finfo(dtype).min


class MeanPooler(nn.Module):
    """In BertPooler's place: the mean of the last hidden states over the real tokens."""
    def forward(self, hidden_states, attention_mask):
        mask = attention_mask.unsqueeze(-1).to(hidden_states.dtype)
        return (hidden_states * mask).sum(1) / mask.sum(1).clamp(min=1.0)
'''})

# The UvA deep learning course's tutorial 6 (Transformers and multi-head attention): EncoderBlock
# as EncoderLayer (x = x + dropout(attn_out); x = norm1(x); ...), its linear_net's layers in
# FeedForward (Linear, Dropout, ReLU(inplace=True), Linear; the dropout inside the feed-forward
# block is the tutorial's), TransformerEncoder's ModuleList of blocks, PositionalEncoding with its
# pe buffer (persistent=False, exp and log), and its mask convention (1 to keep; the course's
# layers get mask == 0); pooled with the mean over the kept positions.
UVA_STACK = Alternative("uva_tutorial6_keep_mask_pe_buffer", "02-layers", {
    "ffn-code": '''
class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.dropout = nn.Dropout(dropout)
        self.relu = nn.ReLU(inplace=True)
        self.linear2 = nn.Linear(d_ff, d_model)

    def forward(self, x):
        return self.linear2(self.relu(self.dropout(self.linear1(x))))
''',
    "encoder-code": '''
class EncoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0):
        """
        Inputs:
            d_model - Dimensionality of the input
            num_heads - Number of heads to use in the attention block
            d_ff - Dimensionality of the hidden layer in the MLP
            dropout - Dropout probability to use in the dropout layers
        """
        super().__init__()
        # Attention layer
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        # Two-layer MLP
        self.ffn = FeedForward(d_model, d_ff)
        # Layers to apply in between the main layers
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        # Attention part
        attn_out = self.self_attn(x, x, mask=mask)
        x = x + self.dropout(attn_out)
        x = self.norm1(x)
        # MLP part
        linear_out = self.ffn(x)
        x = x + self.dropout(linear_out)
        x = self.norm2(x)
        return x
''',
    "classifier-code": '''
class EncoderClassifier(nn.Module):
    def __init__(self, vocab_size, num_classes, d_model, num_heads, num_layers, d_ff,
                 dropout=0.1, pad_id=0, max_len=64):
        super().__init__()
        self.model_dim, self.pad_id = d_model, pad_id
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.input_dropout = nn.Dropout(dropout)
        self.positional_encoding = PositionalEncoding(d_model=d_model, max_len=max_len)
        self.layers = nn.ModuleList([EncoderLayer(d_model, num_heads, d_ff, dropout)
                                     for _ in range(num_layers)])
        self.head = nn.Linear(d_model, num_classes)

    def forward(self, x, add_positional_encoding=True):
        mask = (x != self.pad_id).unsqueeze(1).unsqueeze(2)        # 1 to keep
        keep = mask[:, 0, 0, :, None].float()
        x = self.embedding(x) * math.sqrt(self.model_dim)
        if add_positional_encoding:
            x = self.positional_encoding(x)
        x = self.input_dropout(x)
        for l in self.layers:
            x = l(x, mask=mask == 0)
        x = (x * keep).sum(dim=1) / keep.sum(dim=1)
        return F.log_softmax(self.head(x), dim=-1)

    @torch.no_grad()
    def get_attention_maps(self, x):
        mask = (x != self.pad_id).unsqueeze(1).unsqueeze(2)
        x = self.positional_encoding(self.embedding(x) * math.sqrt(self.model_dim))
        attention_maps = []
        for l in self.layers:
            l(x, mask=mask == 0)
            attention_maps.append(l.self_attn.attention_weights)
            x = l(x, mask=mask == 0)
        return attention_maps
''',
    "regressor-code": '''
class EncoderRegressor(nn.Module):
    def __init__(self, vocab_size, d_model, num_heads, num_layers, d_ff, dropout=0.1, pad_id=0,
                 max_len=64):
        super().__init__()
        self.model_dim, self.pad_id = d_model, pad_id
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.input_dropout = nn.Dropout(dropout)
        self.positional_encoding = PositionalEncoding(d_model=d_model, max_len=max_len)
        self.layers = nn.ModuleList([EncoderLayer(d_model, num_heads, d_ff, dropout)
                                     for _ in range(num_layers)])
        self.head = nn.Linear(d_model, 1)

    def forward(self, x, add_positional_encoding=True):
        mask = (x != self.pad_id).unsqueeze(1).unsqueeze(2)        # 1 to keep
        keep = mask[:, 0, 0, :, None].float()
        x = self.embedding(x) * math.sqrt(self.model_dim)
        if add_positional_encoding:
            x = self.positional_encoding(x)
        x = self.input_dropout(x)
        for l in self.layers:
            x = l(x, mask=mask == 0)
        x = (x * keep).sum(dim=1) / keep.sum(dim=1)
        return self.head(x)[:, 0]
'''}, added={"classifier-code": '''
class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=5000):
        """
        Inputs
            d_model - Hidden dimensionality of the input.
            max_len - Maximum length of a sequence to expect.
        """
        super().__init__()
        # Create matrix of [SeqLen, HiddenDim] representing the positional encoding for max_len
        # inputs
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        pe = pe.unsqueeze(0)
        # register_buffer => Tensor which is not a parameter, but should be part of the modules
        # state. Used for tensors that need to be on the same device as the module.
        # persistent=False tells PyTorch to not add the buffer to the state dict (e.g. when we
        # save the model)
        self.register_buffer("pe", pe, persistent=False)

    def forward(self, x):
        x = x + self.pe[:, : x.size(1)]
        return x
'''})

H11_PORTS = [D2L_STACK, BERT_STACK, UVA_STACK]
PORTS += H11_PORTS
ALTERNATIVES += H11_PORTS


# -- d2l's idiom in the heads (issue 23, the third review) -----------------------------------------
# d2l's TransformerEncoder keeps each block's attention weights as it runs
# (`self.attention_weights[i] = blk.attention.attention.attention_weights`), here through the
# contract's names: each EncoderLayer's self_attn keeps its last weights in attention_weights.
D2L_WEIGHTS_BODY = '''
        self.d_model, self.pad_id = d_model, pad_id
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.register_buffer("positions", positional_encoding(max_len, d_model), persistent=False)
        self.layers = nn.ModuleList(EncoderLayer(d_model, num_heads, d_ff, dropout)
                                    for _ in range(num_layers))
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(d_model, {out})

    def forward(self, tokens):
        X = self.embedding(tokens) * math.sqrt(self.d_model) + self.positions[:tokens.shape[1]]
        X = self.dropout(X)
        valid = (tokens != self.pad_id).unsqueeze(-1).float()
        self.attention_weights = [None] * len(self.layers)
        for i, blk in enumerate(self.layers):
            X = blk(X, padding_mask(tokens, self.pad_id))
            self.attention_weights[i] = blk.self_attn.attention_weights
        pooled = (X * valid).sum(dim=1) / valid.sum(dim=1).clamp(min=1)
        return {result}
'''
D2L_ATTENTION_WEIGHTS = Alternative("d2l_heads_keep_attention_weights", "02-layers", {
    "classifier-code": '''
class EncoderClassifier(nn.Module):
    def __init__(self, vocab_size, num_classes, d_model, num_heads, num_layers, d_ff,
                 dropout=0.1, pad_id=0, max_len=64):
        super().__init__()''' + D2L_WEIGHTS_BODY.format(
        out="num_classes", result="F.log_softmax(self.head(pooled), dim=-1)"),
    "regressor-code": '''
class EncoderRegressor(nn.Module):
    def __init__(self, vocab_size, d_model, num_heads, num_layers, d_ff, dropout=0.1, pad_id=0,
                 max_len=64):
        super().__init__()''' + D2L_WEIGHTS_BODY.format(
        out="1", result="self.head(pooled).squeeze(-1)")})
ALTERNATIVES += [D2L_ATTENTION_WEIGHTS]


# -- 03-sorting: greedy decoding on a buffer of fixed shape (review attack23) ------------------------
# The whole buffer [B, length + 1] is decoded at each step and the logits of position t read: the
# causal mask hides the positions not yet written. greedy.encoder_once once refused it, asking
# that each decode call's input be exactly the tokens chosen so far.
FIXED_SHAPE_GREEDY = Alternative("greedy_fixed_shape_buffer", "03-sorting", {
    "greedy-code": '''
@torch.no_grad()
def greedy_decode(model, src, bos, length=None):
    length = src.shape[1] if length is None else length
    memory = model.encode(src)
    ys = torch.full((src.shape[0], length + 1), bos, dtype=torch.long, device=src.device)
    for t in range(length):
        logits = model.decode(ys, memory)[:, t]
        logits[:, bos] = float("-inf")
        ys[:, t + 1] = logits.argmax(dim=-1)
    return ys[:, 1:]
'''})
ALTERNATIVES += [FIXED_SHAPE_GREEDY]


# -- three more public implementations, ported (mutation branch) -----------------------------------
# The TensorFlow tutorial "Transformer model for language understanding" (tensorflow.org/text,
# the Keras-subclassing version), translated to PyTorch as a student would: scaled_dot_product_
# attention with `scaled_attention_logits += (mask * -1e9)` (the course's bool mask multiplies as
# 0/1), d_k cast to a float tensor, split_heads(x, batch_size) with reshape and a transpose of
# perm [0, 2, 1, 3], the concat as transpose + reshape(batch_size, -1, d_model), its wq, wk, wv
# and dense under the contract's names; create_padding_mask (`seq == 0` as float, [:, None, None,
# :]) and create_look_ahead_mask (`1 - band_part(ones, -1, 0)`) made bool, as the contract asks.
# The tutorial's call(v, k, q, mask) order becomes the contract's forward(x_q, x_kv, mask).
TF_ATTENTION = Alternative("tensorflow_tutorial_additive_band_part", "01-attention", {
    "sdpa-code": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    """Calculate the attention weights.
    q, k, v must have matching leading dimensions.
    The mask has different shapes depending on its type (padding or look ahead)
    but it must be broadcastable for addition.
    """
    matmul_qk = torch.matmul(q, k.transpose(-2, -1))  # (..., seq_len_q, seq_len_k)

    # scale matmul_qk
    dk = torch.tensor(k.shape[-1], dtype=torch.float32)
    scaled_attention_logits = matmul_qk / torch.sqrt(dk)

    # add the mask to the scaled tensor.
    if mask is not None:
        scaled_attention_logits += (mask * -1e9)

    # softmax is normalized on the last axis (seq_len_k) so that the scores add up to 1.
    attention_weights = torch.softmax(scaled_attention_logits, dim=-1)  # (..., seq_len_q, seq_len_k)

    output = torch.matmul(attention_weights, v)  # (..., seq_len_q, depth_v)

    return output, attention_weights
''',
    "mha-code": '''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super(MultiHeadAttention, self).__init__()
        self.num_heads = num_heads
        self.d_model = d_model

        assert d_model % self.num_heads == 0

        self.depth = d_model // self.num_heads

        self.w_q = nn.Linear(d_model, d_model)      # the tutorial's wq, wk, wv and dense
        self.w_k = nn.Linear(d_model, d_model)
        self.w_v = nn.Linear(d_model, d_model)

        self.w_o = nn.Linear(d_model, d_model)

    def split_heads(self, x, batch_size):
        """Split the last dimension into (num_heads, depth).
        Transpose the result such that the shape is (batch_size, num_heads, seq_len, depth)
        """
        x = torch.reshape(x, (batch_size, -1, self.num_heads, self.depth))
        return x.permute(0, 2, 1, 3)

    def forward(self, x_q, x_kv, mask=None):
        batch_size = x_q.shape[0]

        q = self.w_q(x_q)  # (batch_size, seq_len, d_model)
        k = self.w_k(x_kv)  # (batch_size, seq_len, d_model)
        v = self.w_v(x_kv)  # (batch_size, seq_len, d_model)

        q = self.split_heads(q, batch_size)  # (batch_size, num_heads, seq_len_q, depth)
        k = self.split_heads(k, batch_size)  # (batch_size, num_heads, seq_len_k, depth)
        v = self.split_heads(v, batch_size)  # (batch_size, num_heads, seq_len_v, depth)

        # scaled_attention.shape == (batch_size, num_heads, seq_len_q, depth)
        # attention_weights.shape == (batch_size, num_heads, seq_len_q, seq_len_k)
        scaled_attention, attention_weights = scaled_dot_product_attention(q, k, v, mask)
        self.attention_weights = attention_weights

        scaled_attention = scaled_attention.permute(0, 2, 1, 3)  # (batch_size, seq_len_q, num_heads, depth)

        concat_attention = torch.reshape(scaled_attention,
                                         (batch_size, -1, self.d_model))  # (batch_size, seq_len_q, d_model)

        output = self.w_o(concat_attention)  # (batch_size, seq_len_q, d_model)

        return output
''',
    "masks-code": '''
def causal_mask(T):
    # the tutorial's create_look_ahead_mask(size)
    mask = 1 - torch.tril(torch.ones((T, T)))   # band_part(ones, -1, 0)
    return mask.bool()  # (seq_len, seq_len)


def padding_mask(tokens, pad_id):
    # the tutorial's create_padding_mask(seq)
    seq = torch.eq(tokens, pad_id).float()

    # add extra dimensions to add the padding
    # to the attention logits.
    return seq[:, None, None, :].bool()  # (batch_size, 1, 1, seq_len)
'''})

# The same tutorial's layers: positional_encoding through get_angles in numpy (its [np.newaxis, ...]
# left out: the contract's table is [T, d_model]), point_wise_feed_forward_network as an
# nn.Sequential in a cell of its own (the contract's FeedForward holds it, its two Linear layers
# also under linear1 and linear2), EncoderLayer and DecoderLayer with the tutorial's dropout1-3
# and its LayerNormalization(epsilon=1e-6), out1 / out2 / out3 as in call(); the tutorial's mha,
# mha1, mha2 and layernorm1-3 are the contract's self_attn, cross_attn and norm1-3 (the grader
# puts its stand-ins under the contract's names). The classifier is the tutorial's Encoder
# (embedding, `x *= sqrt(d_model)`, `x += pos_encoding[:seq_len]`, dropout, the layers) with a
# masked GlobalAveragePooling1D and a Dense head with log_softmax.
TF_LAYERS = Alternative("tensorflow_tutorial_get_angles_out123", "02-layers", {
    "positions-code": '''
import numpy as np


def get_angles(pos, i, d_model):
    angle_rates = 1 / np.power(10000, (2 * (i//2)) / np.float32(d_model))
    return pos * angle_rates


def positional_encoding(T, d_model):
    angle_rads = get_angles(np.arange(T)[:, np.newaxis],
                            np.arange(d_model)[np.newaxis, :],
                            d_model)

    # apply sin to even indices in the array; 2i
    angle_rads[:, 0::2] = np.sin(angle_rads[:, 0::2])

    # apply cos to odd indices in the array; 2i+1
    angle_rads[:, 1::2] = np.cos(angle_rads[:, 1::2])

    return torch.tensor(angle_rads, dtype=torch.float32)
''',
    "ffn-code": '''
class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.net = point_wise_feed_forward_network(d_model, d_ff)
        self.linear1, self.linear2 = self.net[0], self.net[2]

    def forward(self, x):
        return self.net(x)
''',
    "encoder-code": '''
class EncoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.1):
        super(EncoderLayer, self).__init__()

        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.ffn = FeedForward(d_model, d_ff)

        self.norm1 = nn.LayerNorm(d_model, eps=1e-6)
        self.norm2 = nn.LayerNorm(d_model, eps=1e-6)

        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        attn_output = self.self_attn(x, x, mask)  # (batch_size, input_seq_len, d_model)
        attn_output = self.dropout1(attn_output)
        out1 = self.norm1(x + attn_output)  # (batch_size, input_seq_len, d_model)

        ffn_output = self.ffn(out1)  # (batch_size, input_seq_len, d_model)
        ffn_output = self.dropout2(ffn_output)
        out2 = self.norm2(out1 + ffn_output)  # (batch_size, input_seq_len, d_model)

        return out2
''',
    "decoder-code": '''
class DecoderLayer(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.1):
        super(DecoderLayer, self).__init__()

        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.cross_attn = MultiHeadAttention(d_model, num_heads)

        self.ffn = FeedForward(d_model, d_ff)

        self.norm1 = nn.LayerNorm(d_model, eps=1e-6)
        self.norm2 = nn.LayerNorm(d_model, eps=1e-6)
        self.norm3 = nn.LayerNorm(d_model, eps=1e-6)

        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)

    def forward(self, y, memory, self_mask=None, memory_mask=None):
        # memory.shape == (batch_size, input_seq_len, d_model)
        attn1 = self.self_attn(y, y, self_mask)  # (batch_size, target_seq_len, d_model)
        attn1 = self.dropout1(attn1)
        out1 = self.norm1(attn1 + y)

        attn2 = self.cross_attn(out1, memory, memory_mask)  # (batch_size, target_seq_len, d_model)
        attn2 = self.dropout2(attn2)
        out2 = self.norm2(attn2 + out1)  # (batch_size, target_seq_len, d_model)

        ffn_output = self.ffn(out2)  # (batch_size, target_seq_len, d_model)
        ffn_output = self.dropout3(ffn_output)
        out3 = self.norm3(ffn_output + out2)  # (batch_size, target_seq_len, d_model)

        return out3
''',
    "classifier-code": '''
class EncoderClassifier(nn.Module):
    def __init__(self, vocab_size, num_classes, d_model, num_heads, num_layers, d_ff,
                 dropout=0.1, pad_id=0, max_len=64):
        super().__init__()

        self.d_model = d_model
        self.num_layers = num_layers
        self.pad_id = pad_id

        self.embedding = nn.Embedding(vocab_size, d_model)
        self.register_buffer("pos_encoding", positional_encoding(max_len, self.d_model),
                             persistent=False)

        self.layers = nn.ModuleList([EncoderLayer(d_model, num_heads, d_ff, dropout)
                                     for _ in range(num_layers)])

        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(d_model, num_classes)

    def forward(self, tokens):
        seq_len = tokens.shape[1]
        mask = padding_mask(tokens, self.pad_id)

        # adding embedding and position encoding.
        x = self.embedding(tokens)  # (batch_size, input_seq_len, d_model)
        x *= math.sqrt(self.d_model)
        x += self.pos_encoding[:seq_len, :]

        x = self.dropout(x)

        for i in range(self.num_layers):
            x = self.layers[i](x, mask)

        # GlobalAveragePooling1D with the padding mask: the mean over the real tokens
        keep = (tokens != self.pad_id).float()[:, :, None]
        pooled = (x * keep).sum(1) / torch.clamp(keep.sum(1), min=1.0)
        return F.log_softmax(self.head(pooled), dim=-1)
'''}, added={"ffn-code": '''
def point_wise_feed_forward_network(d_model, dff):
    return nn.Sequential(
        nn.Linear(d_model, dff),  # (batch_size, seq_len, dff), Dense(dff, activation='relu')
        nn.ReLU(),
        nn.Linear(dff, d_model)  # (batch_size, seq_len, d_model)
    )
'''})

# d2l.ai's attention chapter (11.3 and 11.5, the PyTorch version): masked_softmax, which flattens
# the scores to 2-D and writes -1e6 into the masked entries in place (d2l's _sequence_mask; here
# from the course's bool mask instead of valid_lens), DotProductAttention as a module that keeps
# its attention_weights and multiplies with torch.bmm (so the scores are flattened to [-1, T, d]
# first: the contract's q has any number of leading dimensions), and MultiHeadAttention with
# transpose_qkv / transpose_output, the heads folded into the batch (B * h); the mask is broadcast
# to [B, h, Tq, Tk] and folded the same way, as d2l repeats valid_lens with repeat_interleave. The
# contract asks for nn.Linear(d_model, d_model) with bias named w_q..w_o (d2l: LazyLinear, bias
# False, W_q..W_o) and for the weights as [B, h, Tq, Tk] (d2l keeps them as [B * h, Tq, Tk]).
D2L_ATTENTION = Alternative("d2l_masked_softmax_bmm_transpose_qkv", "01-attention", {
    "sdpa-code": '''
def masked_softmax(X, mask):
    """Perform softmax operation by masking elements on the last axis."""
    # mask: True where blocked (the course's convention), broadcastable to X
    if mask is None:
        return nn.functional.softmax(X, dim=-1)
    else:
        shape = X.shape
        mask = torch.broadcast_to(mask, shape).reshape(-1, shape[-1])
        X = X.reshape(-1, shape[-1])
        # On the last axis, replace masked elements with a very large negative
        # value, whose exponentiation outputs 0
        X[mask] = -1e6
        return nn.functional.softmax(X.reshape(shape), dim=-1)


def scaled_dot_product_attention(q, k, v, mask=None):
    """Scaled dot product attention."""
    d = q.shape[-1]
    lead = q.shape[:-2]
    queries = q.reshape(-1, q.shape[-2], d)
    keys = k.reshape(-1, k.shape[-2], d)
    values = v.reshape(-1, v.shape[-2], v.shape[-1])
    # Swap the last two dimensions of keys with keys.transpose(1, 2)
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    attention_weights = masked_softmax(scores.reshape(*lead, *scores.shape[1:]), mask)
    out = torch.bmm(attention_weights.reshape(scores.shape), values)
    return out.reshape(*lead, *out.shape[1:]), attention_weights
''',
    "mha-code": '''
class MultiHeadAttention(nn.Module):
    """Multi-head attention."""
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        self.num_heads = num_heads
        self.attention = DotProductAttention(dropout)
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x_q, x_kv, mask=None):
        # Shape of queries, keys, or values:
        # (batch_size, no. of queries or key-value pairs, num_hiddens)
        # After transposing, shape of output queries, keys, or values:
        # (batch_size * num_heads, no. of queries or key-value pairs,
        # num_hiddens / num_heads)
        queries = self.transpose_qkv(self.w_q(x_q))
        keys = self.transpose_qkv(self.w_k(x_kv))
        values = self.transpose_qkv(self.w_v(x_kv))

        if mask is not None:
            # the mask for every head, folded into the batch as the heads are
            B, Tq, Tk = x_q.shape[0], x_q.shape[1], x_kv.shape[1]
            mask = torch.broadcast_to(mask, (B, self.num_heads, Tq, Tk)).reshape(-1, Tq, Tk)

        # Shape of output: (batch_size * num_heads, no. of queries,
        # num_hiddens / num_heads)
        output = self.attention(queries, keys, values, mask)
        self.attention_weights = self.attention.attention_weights.reshape(
            -1, self.num_heads, *self.attention.attention_weights.shape[1:])
        # Shape of output_concat: (batch_size, no. of queries, num_hiddens)
        output_concat = self.transpose_output(output)
        return self.w_o(output_concat)

    def transpose_qkv(self, X):
        """Transposition for parallel computation of multiple attention heads."""
        # Shape of input X: (batch_size, no. of queries or key-value pairs,
        # num_hiddens). Shape of output X: (batch_size, no. of queries or
        # key-value pairs, num_heads, num_hiddens / num_heads)
        X = X.reshape(X.shape[0], X.shape[1], self.num_heads, -1)
        # Shape of output X: (batch_size, num_heads, no. of queries or key-value
        # pairs, num_hiddens / num_heads)
        X = X.permute(0, 2, 1, 3)
        # Shape of output: (batch_size * num_heads, no. of queries or key-value
        # pairs, num_hiddens / num_heads)
        return X.reshape(-1, X.shape[2], X.shape[3])

    def transpose_output(self, X):
        """Reverse the operation of transpose_qkv."""
        X = X.reshape(-1, self.num_heads, X.shape[1], X.shape[2])
        X = X.permute(0, 2, 1, 3)
        return X.reshape(X.shape[0], X.shape[1], -1)
''',
    "masks-code": '''
def causal_mask(T):
    # d2l's dec_valid_lens = arange(1, T + 1): query i sees keys 0..i
    dec_valid_lens = torch.arange(1, T + 1)
    return torch.arange(T)[None, :] >= dec_valid_lens[:, None]


def padding_mask(tokens, pad_id):
    return (tokens == pad_id).reshape(tokens.shape[0], 1, 1, tokens.shape[1])
'''}, added={"mha-code": '''
class DotProductAttention(nn.Module):
    """Scaled dot product attention, keeping its weights."""
    def __init__(self, dropout):
        super().__init__()
        self.dropout = nn.Dropout(dropout)

    # Shape of queries: (batch_size, no. of queries, d)
    # Shape of keys: (batch_size, no. of key-value pairs, d)
    # Shape of values: (batch_size, no. of key-value pairs, value dimension)
    # Shape of mask: (batch_size, no. of queries, no. of key-value pairs) or None
    def forward(self, queries, keys, values, mask=None):
        out, self.attention_weights = scaled_dot_product_attention(queries, keys, values, mask)
        return out if self.dropout.p == 0 else torch.bmm(
            self.dropout(self.attention_weights), values)
'''})

# karpathy/minGPT's CausalSelfAttention (mingpt/model.py, the 2020 version): separate key, query
# and value projections and proj (under the contract's names as well), attn_drop and resid_drop
# (p 0 by default: the contract has no dropout), the head split as view + transpose(1, 2) and
# merged as transpose + contiguous().view(B, T, C), the scale `* (1.0 / math.sqrt(k.size(-1)))`.
# Its causal mask is a buffer of ones' tril compared with 0 (1 to keep); the contract passes the
# mask in (True: blocked) and keys come from x_kv, so the buffer is causal_mask's answer and the
# forward takes the contract's mask. The sdpa cell holds the lines of forward that attend.
MINGPT_ATTENTION = Alternative("mingpt_key_query_value_proj_tril_buffer", "01-attention", {
    "sdpa-code": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    # causal self-attention; Self-attend: (B, nh, T, hs) x (B, nh, hs, T) -> (B, nh, T, T)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    if mask is not None:
        att = att.masked_fill(mask, float('-inf'))
    att = F.softmax(att, dim=-1)
    y = att @ v  # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)
    return y, att
''',
    "mha-code": '''
class MultiHeadAttention(nn.Module):
    """
    A vanilla multi-head masked self-attention layer with a projection at the end.
    It is possible to use torch.nn.MultiheadAttention here but I am including an
    explicit implementation here to show that there is nothing too scary here.
    """

    def __init__(self, d_model, num_heads, attn_pdrop=0.0, resid_pdrop=0.0):
        super().__init__()
        assert d_model % num_heads == 0
        # key, query, value projections for all heads
        self.key = nn.Linear(d_model, d_model)
        self.query = nn.Linear(d_model, d_model)
        self.value = nn.Linear(d_model, d_model)
        # regularization
        self.attn_drop = nn.Dropout(attn_pdrop)
        self.resid_drop = nn.Dropout(resid_pdrop)
        # output projection
        self.proj = nn.Linear(d_model, d_model)
        self.w_q, self.w_k, self.w_v, self.w_o = self.query, self.key, self.value, self.proj
        self.n_head = num_heads

    def forward(self, x_q, x_kv, mask=None):
        B, T, C = x_q.size()
        S = x_kv.size(1)

        # calculate query, key, values for all heads in batch and move head forward to be the batch dim
        k = self.key(x_kv).view(B, S, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, S, hs)
        q = self.query(x_q).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        v = self.value(x_kv).view(B, S, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, S, hs)

        y, att = scaled_dot_product_attention(q, k, v, mask)
        self.attention_weights = att
        if self.attn_drop.p > 0:
            y = self.attn_drop(att) @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # re-assemble all head outputs side by side

        # output projection
        y = self.resid_drop(self.proj(y))
        return y
''',
    "masks-code": '''
def causal_mask(T):
    # causal mask to ensure that attention is only applied to the left in the input sequence
    mask = torch.tril(torch.ones(T, T)).view(1, 1, T, T)
    return mask[0, 0] == 0


def padding_mask(tokens, pad_id):
    B, T = tokens.size()
    return (tokens == pad_id).view(B, 1, 1, T)
'''})

NEW_PORTS = [TF_ATTENTION, TF_LAYERS, D2L_ATTENTION, MINGPT_ATTENTION]
PORTS += NEW_PORTS
ALTERNATIVES += NEW_PORTS
