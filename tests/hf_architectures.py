"""The real-model test set: Hugging Face Transformers architectures built from small
configs with random weights (no downloads), with a closed-form FLOP count where one
exists.

Each entry of :data:`ARCHITECTURES` builds ``(module, example_inputs)`` with a fixed
seed. :func:`closed_form_flops` counts the multiply-adds (x2) of the matrix products
and convolutions of one forward: linear layers and convolutions from forward hooks on
the real run, plus the attention products (``Q @ K^T`` and ``P @ V``: ``4 * B * S_q *
S_k * width`` per attention layer) and the routed experts of MoE blocks
(``2 * tokens * top_k * 3 * hidden * intermediate``) from the config.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

V = 96  # vocabulary of the text models
S = 8  # sequence length
B = 2  # batch (GPT-2: 4)


def _ids(batch: int = B, seq: int = S, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, V, (batch, seq), generator=torch.Generator().manual_seed(seed))


def _image(batch: int = B, size: int = 32) -> torch.Tensor:
    return torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(2))


_TEXT = dict(
    use_cache=False, vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
    intermediate_size=64,
)


class _Seq2Seq(torch.nn.Module):
    """An encoder-decoder model called with ``(input_ids, decoder_input_ids)``."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, decoder_input_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, decoder_input_ids=decoder_input_ids).last_hidden_state


@dataclass(frozen=True)
class Arch:
    """One architecture of the test set.

    ``attention``: attention layers as ``(count, S_q, S_k, width)`` (None: no closed form
    for the attention, e.g. shifted windows); ``moe``: ``(blocks, top_k, hidden,
    intermediate)`` of the routed experts.
    """

    name: str
    family: str
    build: Callable[[], tuple[torch.nn.Module, tuple[torch.Tensor, ...]]]
    attention: tuple[tuple[int, int, int, int], ...] | None = ()
    moe: tuple[int, int, int, int] | None = None
    batch: int = B


def _text(cls: str, model: str, **kw: Any) -> Callable[[], tuple[torch.nn.Module, tuple]]:
    def build() -> tuple[torch.nn.Module, tuple]:
        import transformers as T

        cfg = getattr(T, cls)(**{**_TEXT, **kw})
        return getattr(T, model)(cfg), (_ids(),)

    return build


def _make(fn: Callable[[Any], tuple[torch.nn.Module, tuple]]) -> Callable[[], tuple]:
    def build() -> tuple[torch.nn.Module, tuple]:
        import transformers as T

        return fn(T)

    return build


def _dec(layers: int = 2, width: int = 32, seq: int = S) -> tuple[tuple[int, int, int, int], ...]:
    return ((layers, seq, seq, width),)


ARCHITECTURES: dict[str, Arch] = {a.name: a for a in [
    Arch("gpt2", "dense decoder", _make(lambda T: (T.GPT2Model(T.GPT2Config(
        use_cache=False, vocab_size=V, n_embd=32, n_layer=2, n_head=4, n_positions=32)),
        (_ids(batch=4),))), _dec(), batch=4),
    Arch("llama", "dense decoder (GQA)", _text("LlamaConfig", "LlamaModel", num_key_value_heads=2), _dec()),
    Arch("qwen2", "dense decoder (GQA)", _text("Qwen2Config", "Qwen2Model", num_key_value_heads=2), _dec()),
    Arch("mistral", "dense decoder (GQA)", _text("MistralConfig", "MistralModel", num_key_value_heads=2), _dec()),
    Arch("gemma", "dense decoder", _text("GemmaConfig", "GemmaModel", num_key_value_heads=2, head_dim=8), _dec()),
    Arch("phi3", "dense decoder", _text("Phi3Config", "Phi3Model", num_key_value_heads=2, pad_token_id=0), _dec()),
    Arch("gpt_neox", "dense decoder", _text("GPTNeoXConfig", "GPTNeoXModel"), _dec()),
    Arch("opt", "dense decoder", _make(lambda T: (T.OPTModel(T.OPTConfig(
        use_cache=False, vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        ffn_dim=64, word_embed_proj_dim=32)), (_ids(),))), _dec()),
    Arch("bloom", "dense decoder (ALiBi)", _make(lambda T: (T.BloomModel(T.BloomConfig(
        use_cache=False, vocab_size=V, hidden_size=32, n_layer=2, n_head=4)), (_ids(),))), _dec()),
    Arch("falcon", "dense decoder", _make(lambda T: (T.FalconModel(T.FalconConfig(
        use_cache=False, vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4)),
        (_ids(),))), _dec()),
    Arch("mixtral", "MoE decoder", _text("MixtralConfig", "MixtralModel", num_key_value_heads=2,
         num_local_experts=4, num_experts_per_tok=2), _dec(), moe=(2, 2, 32, 64)),
    Arch("qwen2_moe", "MoE decoder (shared expert)", _text(
        "Qwen2MoeConfig", "Qwen2MoeModel", num_key_value_heads=2, num_experts=4, num_experts_per_tok=2,
        moe_intermediate_size=32, shared_expert_intermediate_size=32), _dec(), moe=(2, 2, 32, 32)),
    Arch("bert", "encoder", _text("BertConfig", "BertModel"), _dec()),
    Arch("distilbert", "encoder", _make(lambda T: (T.DistilBertModel(T.DistilBertConfig(
        vocab_size=V, dim=32, n_layers=2, n_heads=4, hidden_dim=64)), (_ids(),))), _dec()),
    Arch("roberta", "encoder", _text("RobertaConfig", "RobertaModel"), _dec()),
    Arch("t5", "encoder-decoder", _make(lambda T: (_Seq2Seq(T.T5Model(T.T5Config(
        use_cache=False, vocab_size=V, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4))),
        (_ids(), _ids(seed=3)))), _dec(6)),
    Arch("bart", "encoder-decoder", _make(lambda T: (_Seq2Seq(T.BartModel(T.BartConfig(
        use_cache=False, vocab_size=V, d_model=32, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64))),
        (_ids(), _ids(seed=3)))), _dec(6)),
    Arch("vit", "vision transformer", _make(lambda T: (T.ViTModel(T.ViTConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, image_size=32,
        patch_size=8)), (_image(),))), _dec(seq=17)),
    Arch("deit", "vision transformer", _make(lambda T: (T.DeiTModel(T.DeiTConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, image_size=32,
        patch_size=8)), (_image(),))), _dec(seq=18)),
    Arch("clip_vision", "vision transformer", _make(lambda T: (T.CLIPVisionModel(T.CLIPVisionConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, image_size=32,
        patch_size=8)), (_image(),))), _dec(seq=17)),
    Arch("swin", "vision transformer (windows)", _make(lambda T: (T.SwinModel(T.SwinConfig(
        image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 4], window_size=4)),
        (_image(),))), None),
    Arch("convnext", "CNN", _make(lambda T: (T.ConvNextModel(T.ConvNextConfig(
        hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1])), (_image(),)))),
    Arch("resnet", "CNN", _make(lambda T: (T.ResNetModel(T.ResNetConfig(
        hidden_sizes=[16, 32], depths=[1, 1], embedding_size=16)), (_image(),)))),
    Arch("segformer", "vision transformer (reduced keys)", _make(lambda T: (T.SegformerModel(
        T.SegformerConfig(num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32],
                          num_attention_heads=[1, 2], patch_sizes=[7, 3], strides=[4, 2],
                          mlp_ratios=[2, 2])), (_image(),))), None),
    Arch("wav2vec2", "audio encoder", _make(lambda T: (T.Wav2Vec2Model(T.Wav2Vec2Config(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, conv_dim=(16, 16),
        conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=4)), (torch.randn(B, 800, generator=torch.Generator().manual_seed(4)),))),
        _dec(seq=79)),
    Arch("whisper_encoder", "audio encoder", _make(lambda T: (T.WhisperModel(T.WhisperConfig(
        vocab_size=V, pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1, d_model=32,
        encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
        encoder_ffn_dim=64, decoder_ffn_dim=64, num_mel_bins=16, max_source_positions=16)).encoder,
        (torch.randn(B, 16, 32, generator=torch.Generator().manual_seed(5)),))), _dec(seq=16)),
]}


def build(name: str) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """The module (eval mode, seeded random weights) and example inputs of ``name``."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        module, inputs = ARCHITECTURES[name].build()
    return module.eval(), inputs


def closed_form_flops(name: str, module: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> float:
    """Matrix-product and convolution FLOPs of one forward of ``module`` (see the module
    docstring); raises KeyError for an architecture without a closed form."""
    arch = ARCHITECTURES[name]
    if arch.attention is None:
        raise KeyError(name)
    total = 0.0
    hooks = []

    def linear(mod: Any, args: tuple, out: torch.Tensor) -> None:
        nonlocal total
        w = mod.weight
        k, n = (w.shape[0], w.shape[1]) if type(mod).__name__ == "Conv1D" else (w.shape[1], w.shape[0])
        total += 2.0 * out.numel() / n * k * n

    def conv(mod: torch.nn.Module, args: tuple, out: torch.Tensor) -> None:
        nonlocal total
        w = mod.weight
        total += 2.0 * out.numel() * w[0].numel()

    for sub in module.modules():
        if isinstance(sub, torch.nn.Linear) or type(sub).__name__ == "Conv1D":
            hooks.append(sub.register_forward_hook(linear))
        elif isinstance(sub, torch.nn.Conv1d | torch.nn.Conv2d):
            hooks.append(sub.register_forward_hook(conv))
    try:
        with torch.no_grad():
            module(*inputs)
    finally:
        for h in hooks:
            h.remove()
    for count, s_q, s_k, width in arch.attention:
        total += 4.0 * arch.batch * count * s_q * s_k * width
    if arch.moe is not None:
        blocks, k, hidden, inter = arch.moe
        total += 2.0 * arch.batch * S * k * 3 * hidden * inter * blocks
    return total
