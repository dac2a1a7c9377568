"""Transformer models: BERT-base, GPT-2 small and ViT-B/16, in plain torch ops.

BERT and GPT-2 follow the Hugging Face reference implementations layer for layer,
ViT-B/16 follows torchvision's ``vit_b_16`` (same parameter shapes and counts, same
layer norm epsilons and GELU variants), with the attention written as explicit
``matmul`` / ``softmax`` operators (no ``nn.MultiheadAttention``, no fused
``scaled_dot_product_attention``), so that every kernel shows up as a graph node.

==========  ============  =====================================================
model       parameters    reference
==========  ============  =====================================================
bert_base   109,482,240   Devlin et al. 2019 ("110 M"): 12 layers, 768 hidden,
                          12 heads, FFN 3072, vocab 30522, 512 positions, 2 token
                          types, post-LN, exact GELU, tanh pooler
gpt2        124,439,808   Radford et al. 2019, GPT-2 small: 12 layers, 768, 12
                          heads, vocab 50257, 1024 positions, pre-LN, tanh GELU,
                          LM head tied to the token embedding, causal mask
vit_b_16    86,567,656    Dosovitskiy et al. 2021, torchvision variant: 16x16
                          patches, class token, learned positions, 12 pre-LN
                          layers, 768, 12 heads, MLP 3072, exact GELU; 17.56
                          GMACs at 224x224
==========  ============  =====================================================

Weights follow the reference initialisation (N(0, 0.02) for linear layers and
embeddings, zero biases, unit layer-norm scales; ViT as torchvision, see
:class:`VisionTransformer`). A language model is built for one sequence length
``seq_len``: the position ids, token type ids and the causal mask are constant buffers
of that length, so the imported graph holds no constant larger than it needs. ViT is
built for one ``image_size``: its position embedding has one row per patch, plus one
for the class token (the parameter count above is at 224x224, 197 tokens).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F

__all__ = [
    "MODELS",
    "make_inputs",
    "bert_base",
    "gpt2",
    "vit_b_16",
    "Bert",
    "GPT2",
    "VisionTransformer",
]


def _attend(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, heads: int, bias: torch.Tensor | None
) -> torch.Tensor:
    """Multi-head scaled dot-product attention over ``[batch, seq, dim]`` projections."""
    b, n, d = q.shape
    hd = d // heads
    q = q.reshape(b, n, heads, hd).permute(0, 2, 1, 3)  # [b, h, n, hd]
    k = k.reshape(b, n, heads, hd).permute(0, 2, 3, 1)  # [b, h, hd, n]
    v = v.reshape(b, n, heads, hd).permute(0, 2, 1, 3)  # [b, h, n, hd]
    scores = torch.matmul(q, k) / math.sqrt(hd)
    if bias is not None:
        scores = scores + bias
    probs = torch.softmax(scores, dim=3)
    return torch.matmul(probs, v).permute(0, 2, 1, 3).reshape(b, n, d)


def _init_weights(module: nn.Module, std: float = 0.02) -> None:
    """The reference initialisation: N(0, 0.02) weights and embeddings, zero biases."""
    for m in module.modules():
        if isinstance(m, nn.Linear | nn.Embedding):
            nn.init.normal_(m.weight, 0.0, std)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)


def _check_seq_len(seq_len: int, max_positions: int) -> None:
    if (
        isinstance(seq_len, bool)
        or not isinstance(seq_len, numbers.Integral)
        or not 1 <= seq_len <= max_positions
    ):
        raise ValueError(f"seq_len must be an int in [1, {max_positions}], got {seq_len!r}")


# ----------------------------------------------------------------------------- BERT
class BertLayer(nn.Module):
    """Post-LN encoder layer: self-attention, add & norm, FFN (exact GELU), add & norm."""

    def __init__(self, d: int, heads: int, ffn: int, eps: float) -> None:
        super().__init__()
        self.heads = heads
        self.query = nn.Linear(d, d)
        self.key = nn.Linear(d, d)
        self.value = nn.Linear(d, d)
        self.attn_out = nn.Linear(d, d)
        self.attn_norm = nn.LayerNorm(d, eps=eps)
        self.intermediate = nn.Linear(d, ffn)
        self.output = nn.Linear(ffn, d)
        self.out_norm = nn.LayerNorm(d, eps=eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ctx = _attend(self.query(x), self.key(x), self.value(x), self.heads, None)
        x = self.attn_norm(self.attn_out(ctx) + x)
        return self.out_norm(self.output(F.gelu(self.intermediate(x))) + x)


class Bert(nn.Module):
    """BERT encoder (Devlin et al., NAACL 2019) with embeddings and pooler.

    Input: token ids ``[batch, seq_len]`` (int64; token type 0 everywhere, no padding).
    Output: ``(sequence_output [batch, seq_len, d], pooled_output [batch, d])`` as
    Hugging Face's ``BertModel``.
    """

    def __init__(
        self,
        seq_len: int,
        *,
        vocab: int = 30522,
        d: int = 768,
        layers: int = 12,
        heads: int = 12,
        ffn: int = 3072,
        max_positions: int = 512,
        type_vocab: int = 2,
        eps: float = 1e-12,
    ) -> None:
        super().__init__()
        _check_seq_len(seq_len, max_positions)
        self.seq_len = seq_len
        self.vocab_size = vocab
        self.word_embeddings = nn.Embedding(vocab, d)
        self.position_embeddings = nn.Embedding(max_positions, d)
        self.token_type_embeddings = nn.Embedding(type_vocab, d)
        self.emb_norm = nn.LayerNorm(d, eps=eps)
        self.layers = nn.ModuleList(BertLayer(d, heads, ffn, eps) for _ in range(layers))
        self.pooler = nn.Linear(d, d)
        self.register_buffer("position_ids", torch.arange(seq_len).unsqueeze(0), persistent=False)
        self.register_buffer(
            "token_type_ids", torch.zeros(1, seq_len, dtype=torch.int64), persistent=False
        )
        _init_weights(self)

    def forward(self, input_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = (
            self.word_embeddings(input_ids)
            + self.position_embeddings(self.position_ids)
            + self.token_type_embeddings(self.token_type_ids)
        )
        x = self.emb_norm(x)
        for layer in self.layers:
            x = layer(x)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        return x, pooled


# ---------------------------------------------------------------------------- GPT-2
class GPT2Block(nn.Module):
    """Pre-LN decoder block: LN, causal self-attention (fused QKV), add, LN, MLP, add."""

    def __init__(self, d: int, heads: int, eps: float) -> None:
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(d, eps=eps)
        self.c_attn = nn.Linear(d, 3 * d)
        self.attn_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d, eps=eps)
        self.c_fc = nn.Linear(d, 4 * d)
        self.mlp_proj = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor, causal_bias: torch.Tensor) -> torch.Tensor:
        q, k, v = torch.chunk(self.c_attn(self.ln_1(x)), 3, dim=2)
        x = x + self.attn_proj(_attend(q, k, v, self.heads, causal_bias))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT2(nn.Module):
    """GPT-2 language model (Radford et al. 2019), LM head tied to the token embedding.

    Input: token ids ``[batch, seq_len]`` (int64). Output: logits
    ``[batch, seq_len, vocab]``. The causal mask is an additive constant buffer
    (0 on and below the diagonal, -1e9 above).
    """

    def __init__(
        self,
        seq_len: int,
        *,
        vocab: int = 50257,
        d: int = 768,
        layers: int = 12,
        heads: int = 12,
        max_positions: int = 1024,
        eps: float = 1e-5,
    ) -> None:
        super().__init__()
        _check_seq_len(seq_len, max_positions)
        self.seq_len = seq_len
        self.vocab_size = vocab
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(max_positions, d)
        self.blocks = nn.ModuleList(GPT2Block(d, heads, eps) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d, eps=eps)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight
        self.register_buffer("position_ids", torch.arange(seq_len).unsqueeze(0), persistent=False)
        allowed = torch.ones(seq_len, seq_len, dtype=torch.bool).tril()
        bias = torch.zeros(seq_len, seq_len).masked_fill(~allowed, -1e9)
        self.register_buffer("causal_bias", bias.reshape(1, 1, seq_len, seq_len), persistent=False)
        _init_weights(self)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        x = self.wte(input_ids) + self.wpe(self.position_ids)
        for block in self.blocks:
            x = block(x, self.causal_bias)
        return self.lm_head(self.ln_f(x))


# ---------------------------------------------------------------------------- ViT
class ViTBlock(nn.Module):
    """Pre-LN encoder block: LN, self-attention (fused in-projection), add, LN, MLP, add.

    ``in_proj`` is torchvision's ``nn.MultiheadAttention.in_proj_weight`` / ``_bias``
    (``[3 d, d]``, rows q, k, v) as one linear layer, ``out_proj`` its output projection.
    """

    def __init__(self, d: int, heads: int, mlp: int, eps: float) -> None:
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(d, eps=eps)
        self.in_proj = nn.Linear(d, 3 * d)
        self.out_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d, eps=eps)
        self.mlp_1 = nn.Linear(d, mlp)
        self.mlp_2 = nn.Linear(mlp, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = torch.chunk(self.in_proj(self.ln_1(x)), 3, dim=2)
        x = x + self.out_proj(_attend(q, k, v, self.heads, None))
        return x + self.mlp_2(F.gelu(self.mlp_1(self.ln_2(x))))


class VisionTransformer(nn.Module):
    """Vision Transformer (Dosovitskiy et al., ICLR 2021), as torchvision's ``vit_b_16``.

    "An Image is Worth 16x16 Words": a ``patch`` x ``patch`` stride-``patch``
    convolution embeds the image into ``(image_size / patch)**2`` tokens, a learned
    class token is prepended and a learned position embedding added; pre-LN encoder
    blocks, a final layer norm and a linear head on the class token give the logits.

    Input: images ``[batch, 3, image_size, image_size]`` (float32). Output: logits
    ``[batch, num_classes]``.

    Initialisation as torchvision: truncated normal patch embedding (std
    ``1 / sqrt(fan_in)``), zero class token, N(0, 0.02) position embedding, Xavier
    uniform attention and MLP weights with zero attention biases and N(0, 1e-6) MLP
    biases. torchvision zeroes the head, which would make every output 0: the head
    here is N(0, 0.02) with a zero bias, as the language models' layers. Dropout
    (rate 0 in ``vit_b_16``) is left out.
    """

    def __init__(
        self,
        image_size: int,
        num_classes: int = 1000,
        *,
        patch: int = 16,
        d: int = 768,
        layers: int = 12,
        heads: int = 12,
        mlp: int = 3072,
        eps: float = 1e-6,
    ) -> None:
        super().__init__()
        if (
            isinstance(image_size, bool)
            or not isinstance(image_size, numbers.Integral)
            or image_size < patch
            or image_size % patch
        ):
            raise ValueError(
                f"image_size must be a positive int multiple of {patch}, got {image_size!r}"
            )
        self.image_size = image_size
        self.patch = patch
        self.d = d
        tokens = (image_size // patch) ** 2 + 1
        self.conv_proj = nn.Conv2d(3, d, patch, patch)
        self.class_token = nn.Parameter(torch.zeros(1, 1, d))
        self.pos_embedding = nn.Parameter(torch.empty(1, tokens, d).normal_(std=0.02))
        self.blocks = nn.ModuleList(ViTBlock(d, heads, mlp, eps) for _ in range(layers))
        self.ln = nn.LayerNorm(d, eps=eps)
        self.head = nn.Linear(d, num_classes)
        fan_in = 3 * patch * patch
        nn.init.trunc_normal_(self.conv_proj.weight, std=math.sqrt(1.0 / fan_in))
        nn.init.zeros_(self.conv_proj.bias)
        for block in self.blocks:
            nn.init.xavier_uniform_(block.in_proj.weight)
            nn.init.zeros_(block.in_proj.bias)
            nn.init.zeros_(block.out_proj.bias)
            for lin in (block.mlp_1, block.mlp_2):
                nn.init.xavier_uniform_(lin.weight)
                nn.init.normal_(lin.bias, std=1e-6)
        nn.init.normal_(self.head.weight, 0.0, 0.02)
        nn.init.zeros_(self.head.bias)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        b = images.shape[0]
        x = self.conv_proj(images)  # [b, d, h / patch, w / patch]
        x = x.reshape(b, self.d, x.shape[2] * x.shape[3]).permute(0, 2, 1)  # [b, n, d]
        x = torch.cat([self.class_token.expand(b, 1, self.d), x], dim=1)
        x = x + self.pos_embedding
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x)[:, 0])  # the class token (no negative index)


# ------------------------------------------------------------------------- registry
def bert_base(*, seq_len: int = 128) -> Bert:
    """BERT-base encoder (109,482,240 parameters) for sequences of ``seq_len`` tokens."""
    return Bert(seq_len)


def gpt2(*, seq_len: int = 128) -> GPT2:
    """GPT-2 small (124,439,808 parameters, LM head tied) for ``seq_len`` tokens."""
    return GPT2(seq_len)


def vit_b_16(*, image_size: int = 224, num_classes: int = 1000) -> VisionTransformer:
    """ViT-B/16 as torchvision (86,567,656 parameters, 17.56 GMACs at 224x224).

    ``image_size`` must be a multiple of 16; the position embedding (and so the
    parameter count) follows it, as in torchvision.
    """
    return VisionTransformer(image_size, num_classes)


MODELS: dict[str, Callable[..., nn.Module]] = {
    "bert_base": bert_base,
    "gpt2": gpt2,
    "vit_b_16": vit_b_16,
}


def make_inputs(
    model: nn.Module, batch: int, generator: torch.Generator
) -> tuple[torch.Tensor, ...]:
    """Example input of a transformer: token ids, or images for ViT.

    A language model gets random token ids ``[batch, seq_len]`` int64, a vision
    transformer one ``[batch, 3, size, size]`` float32 tensor (as the CNNs).
    """
    if isinstance(model, VisionTransformer):
        size = model.image_size
        return (torch.randn(batch, 3, size, size, generator=generator),)
    ids = torch.randint(0, model.vocab_size, (batch, model.seq_len), generator=generator)
    return (ids,)
