"""The population of the model zoo sweep (python -m coil.bench.zoo): one model of every timm family,
torchvision's classification, detection, segmentation, video and optical-flow models, and
transformers' model classes built from small random configs.

Each entry names a builder, `build(size, train, seed) -> Example`: the model (float32, on the CPU,
in eval mode, or train mode with every dropout off for a training step) and its example inputs,
the same for the same seed. The runner moves both to the device and dtype. Nothing is
downloaded: timm and torchvision models are built with pretrained=False / weights=None, and
transformers models from config objects made here (the runner sets HF_HUB_OFFLINE=1 as well).

timm, torchvision and transformers are imported lazily: a family whose library is missing lists
no models, and `missing()` says why. Names: "timm/<model>", "tv/<model>", "hf/<class>".
Size classes: "cpu" (a 2-core machine: batch 1-2, short sequences) and "cuda" (bigger batches).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import re
from collections.abc import Callable

import torch
from torch import nn

FAMILIES = ("timm", "torchvision", "hf")
PREFIX = {"timm": "timm/", "torchvision": "tv/", "hf": "hf/"}


class NotApplicable(Exception):
    """The model does not run in this mode (e.g. a detection model's training step needs
    targets); recorded as "not applicable", not as a failure."""


@dataclasses.dataclass
class Example:
    model: nn.Module
    args: tuple = ()
    kwargs: dict = dataclasses.field(default_factory=dict)
    desc: str = ""
    # outputs whose sizes depend on the values (detections after NMS): a compiled run may keep a
    # different number of boxes, which is then reported as not comparable rather than wrong
    variable_outputs: bool = False
    # the model computes its own loss from labels in the inputs (outputs.loss)
    has_loss: bool = False


@dataclasses.dataclass(frozen=True)
class Entry:
    name: str
    family: str
    group: str  # timm: the module; torchvision: the kind; hf: the input kind
    build: Callable[[str, bool, int], Example] = dataclasses.field(compare=False, repr=False)
    # "module:function" of the builder, for an entry that is not part of the population (a
    # test's): an isolated run's child process imports it from there
    ref: str = ""


def _have(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing(family: str) -> str | None:
    """Why a family lists no models here, or None."""
    lib = {"timm": "timm", "torchvision": "torchvision", "hf": "transformers"}[family]
    if not _have(lib):
        return f"{lib} is not installed on this machine: the {family} part is skipped"
    return None


def no_dropout(model: nn.Module) -> nn.Module:
    """Every dropout and drop-path off, so that a training step is deterministic and compares."""
    for m in model.modules():
        if "Dropout" in type(m).__name__ and isinstance(getattr(m, "p", None), float):
            m.p = 0.0
        for attr in ("drop_prob", "drop_path_prob"):
            if isinstance(getattr(m, attr, None), float):
                setattr(m, attr, 0.0)
    return model


def _finish(model: nn.Module, train: bool) -> nn.Module:
    return no_dropout(model.train()) if train else model.eval()


# --------------------------------------------------------------------------------------------
# picking the smallest variant by its name
# --------------------------------------------------------------------------------------------

# size words, smallest first (a piece of a name not listed ranks between "small" and "base")
_SIZE_WORDS = {
    "atto": 0, "femto": 1, "pico": 2, "nano": 3, "tiny": 4, "xxs": 4, "xxsmall": 4, "t": 4,
    "xs": 5, "xsmall": 5, "mini": 5, "lite": 5, "small": 6, "s": 6,
    "medium": 8, "m": 8, "base": 9, "b": 9, "large": 10, "l": 10, "xl": 11, "huge": 11, "h": 11,
    "giant": 12, "g": 12, "xxl": 12, "gigantic": 13, "e": 13,
}
_UNRANKED = 7
# a name's last token, when it is a number from this set, is its image size, not depth or width
_RESOLUTIONS = {160, 176, 192, 224, 240, 256, 260, 288, 300, 320, 336, 352, 380, 384, 392, 448,
                456, 480, 512, 518, 528, 560, 576, 600, 640, 768, 800, 1024}


def size_key(name: str) -> tuple:
    """Sort key, smallest model first, from the name alone: the smallest size word after the
    family's own token (atto ... tiny, small, base, large, huge; a single letter counts only as a
    token of its own, so "b0" is no "base"), then an image size above 256 at the end of the name
    as a penalty, then the first number that is no patch or window size and no version ("v2"):
    depth 18 < 50, b0 < b3, width 050 < 100; then the shorter and the alphabetical name. A
    heuristic: it need not find the smallest, only a small one, the same every time."""
    tokens = re.split(r"[_.\-]", name.lower())
    resolution = 0
    if len(tokens) > 1 and tokens[-1].isdigit() and int(tokens[-1]) in _RESOLUTIONS:
        resolution = int(tokens.pop())
    ranks, numbers = [], []
    for i, token in enumerate(tokens):
        if i > 0 and token in _SIZE_WORDS:
            ranks.append(_SIZE_WORDS[token])
            continue
        previous = ""
        for piece in re.findall(r"[a-z]+|\d+", token):
            if piece.isdigit():
                if previous not in ("patch", "p", "w", "window") and not previous.endswith("v"):
                    numbers.append(int(piece))
            elif i > 0 and len(piece) > 1 and piece in _SIZE_WORDS:
                ranks.append(_SIZE_WORDS[piece])
            previous = piece
    rank = min(ranks) if ranks else _UNRANKED
    penalty = resolution if resolution > 256 else 0
    return (rank, penalty, numbers[0] if numbers else 10**6, len(name), name)


def smallest(names: list[str]) -> str:
    return min(names, key=size_key)


# --------------------------------------------------------------------------------------------
# timm: one model per module (family)
# --------------------------------------------------------------------------------------------

TIMM_SKIP_MODULES: dict[str, str] = {}  # module -> why it is left out (none so far)


def _timm_batch(size: str, hw: tuple) -> int:
    if size != "cuda":
        return 1
    pixels = hw[-1] * hw[-2]
    return max(1, min(32, int(32 * 224 * 224 / pixels)))


def _timm_builder(name: str):
    def build(size: str, train: bool, seed: int) -> Example:
        import timm

        torch.manual_seed(seed)
        model = timm.create_model(name, pretrained=False)
        cfg = getattr(model, "pretrained_cfg", None) or getattr(model, "default_cfg", None) or {}
        input_size = tuple(cfg.get("input_size") or (3, 224, 224))
        b = _timm_batch(size, input_size)
        if train and b == 1:
            b = 2  # batch norm in training needs more than one value per channel
        x = torch.randn(b, *input_size)
        desc = f"{b}x{'x'.join(map(str, input_size))}"
        return Example(_finish(model, train), (x,), desc=desc)

    return build


def timm_entries() -> list[Entry]:
    if missing("timm"):
        return []
    try:
        from timm.models import list_models, list_modules
    except ImportError:  # older layouts keep them in the registry only
        from timm.models._registry import list_models, list_modules

    entries = []
    for module in sorted(list_modules()):
        if module in TIMM_SKIP_MODULES:
            continue
        names = list_models(module=module)
        if not names:
            continue
        pick = smallest(names)
        entries.append(Entry(f"timm/{pick}", "timm", module, _timm_builder(pick)))
    return entries


# --------------------------------------------------------------------------------------------
# torchvision: every classification, detection, segmentation, video and optical-flow model
# --------------------------------------------------------------------------------------------

TV_KINDS = ("classification", "detection", "segmentation", "video", "optical_flow")


def _tv_module(kind: str):
    import torchvision.models as m

    return {"classification": m, "detection": m.detection, "segmentation": m.segmentation,
            "video": m.video, "optical_flow": m.optical_flow}[kind]


def _tv_builder(name: str, kind: str):
    def build(size: str, train: bool, seed: int) -> Example:
        import torchvision

        cuda = size == "cuda"
        if kind == "detection" and train:
            raise NotApplicable("a detection model's training step needs targets")
        torch.manual_seed(seed)
        kwargs = {"weights": None}
        if kind in ("detection", "segmentation"):
            kwargs["weights_backbone"] = None  # its default would download ImageNet weights
        model = torchvision.models.get_model(name, **kwargs)
        variable = False
        if kind == "classification":
            hw = 299 if name == "inception_v3" else 224
            b = 32 if cuda else (2 if train else 1)
            args = (torch.randn(b, 3, hw, hw),)
            desc = f"{b}x3x{hw}x{hw}"
        elif kind == "detection":
            n, hw = (2, 512) if cuda else (1, 320)
            args = ([torch.rand(3, hw, hw) for _ in range(n)],)
            desc, variable = f"{n} images 3x{hw}x{hw}", True
        elif kind == "segmentation":
            b, hw = (8, 512) if cuda else (2, 256)
            args = (torch.randn(b, 3, hw, hw),)
            desc = f"{b}x3x{hw}x{hw}"
        elif kind == "video":
            hw = 224 if name.startswith(("mvit", "s3d", "swin3d")) else 112
            b = 4 if cuda else (2 if train else 1)
            args = (torch.randn(b, 3, 16, hw, hw),)
            desc = f"{b}x3x16x{hw}x{hw}"
        else:  # optical flow: two frames, sides a multiple of 8
            b, hw = (4, 256) if cuda else (1, 128)
            args = (torch.randn(b, 3, hw, hw), torch.randn(b, 3, hw, hw))
            desc = f"2 frames {b}x3x{hw}x{hw}"
        return Example(_finish(model, train), args, desc=desc, variable_outputs=variable)

    return build


def tv_entries() -> list[Entry]:
    if missing("torchvision"):
        return []
    import torchvision

    entries = []
    for kind in TV_KINDS:
        for name in sorted(torchvision.models.list_models(module=_tv_module(kind))):
            entries.append(Entry(f"tv/{name}", "torchvision", kind, _tv_builder(name, kind)))
    return entries


# --------------------------------------------------------------------------------------------
# transformers: model classes from small random configs
# --------------------------------------------------------------------------------------------

# Set on every config whose default has the attribute as an integer (lists are left alone).
HF_SMALL = {
    "vocab_size": 1000, "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
    "intermediate_size": 256, "max_position_embeddings": 512, "num_key_value_heads": 2,
    "head_dim": 32, "embedding_size": 128, "type_vocab_size": 2,
    "n_embd": 128, "n_layer": 2, "n_head": 4, "n_positions": 512, "n_inner": 256, "n_ctx": 512,
    "d_model": 128, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 4,
    "decoder_attention_heads": 4, "encoder_ffn_dim": 256, "decoder_ffn_dim": 256,
    "num_layers": 2, "num_decoder_layers": 2, "num_heads": 4, "d_kv": 32, "d_ff": 256,
    "d_inner": 256, "d_head": 32, "ffn_dim": 256, "word_embed_proj_dim": 128,
    "dim": 128, "hidden_dim": 256, "n_layers": 2, "n_heads": 4,
    "num_local_experts": 4, "num_experts": 4, "num_experts_per_tok": 2,
    "moe_intermediate_size": 128, "shared_expert_intermediate_size": 128,
    "max_source_positions": 64, "max_target_positions": 64, "image_size": 64, "patch_size": 8,
    "relative_attention_num_buckets": 32, "sliding_window": 64,
    "max_encoder_position_embeddings": 512, "max_decoder_position_embeddings": 512,
    "rotary_dim": 16,
}
# token ids that must lie inside the smaller vocabulary
_TOKEN_IDS = ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id",
              "sep_token_id", "cls_token_id", "forced_bos_token_id", "forced_eos_token_id")

# num_hidden_layers: ConvNext maps it to num_stages (HF_SMALL's 2 would drop two stages)
_CONV4 = {"hidden_sizes": [32, 64, 128, 256], "depths": [1, 1, 1, 1], "num_hidden_layers": 4}
_VIT = {"image_size": 64, "patch_size": 8}
_AUDIO_CONV = {"conv_dim": [32, 32, 32], "conv_stride": [5, 2, 2], "conv_kernel": [10, 3, 3],
               "num_feat_extract_layers": 3, "num_conv_pos_embeddings": 16,
               "num_conv_pos_embedding_groups": 4, "mask_time_prob": 0.0,
               "mask_feature_prob": 0.0}
_TEXT_SUB = {"vocab_size": 1000, "hidden_size": 128, "num_hidden_layers": 2,
             "num_attention_heads": 4, "intermediate_size": 256, "max_position_embeddings": 64}
_VISION_SUB = {"hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
               "intermediate_size": 256, "image_size": 64, "patch_size": 8}
_MOE = {"decoder_sparse_step": 1, "mlp_only_layers": []}

# class -> (input kind, config overrides applied after HF_SMALL). Kinds: "text" (input_ids,
# attention_mask), "lm" (the same; labels = input_ids in a training step), "s2s" (+
# decoder_input_ids), "image" (pixel_values), "whisper"/"s2t" (input_features + decoder ids),
# "wav" (input_values), "clip" (input_ids + pixel_values).
HF_MODELS: dict[str, tuple[str, dict]] = {
    # encoders
    "AlbertModel": ("text", {}),
    "AlbertForMaskedLM": ("text", {}),
    "BertModel": ("text", {}),
    "BertForMaskedLM": ("text", {}),
    "BertForSequenceClassification": ("text", {}),
    "BigBirdModel": ("text", {"attention_type": "original_full"}),
    "CamembertModel": ("text", {}),
    "ConvBertModel": ("text", {}),
    "DebertaModel": ("text", {}),
    "DebertaV2Model": ("text", {}),
    "DistilBertForMaskedLM": ("text", {}),
    "ElectraModel": ("text", {}),
    "ElectraForPreTraining": ("text", {}),
    "ErnieModel": ("text", {}),
    "FNetModel": ("text", {}),
    "FunnelModel": ("text", {"block_sizes": [1, 1], "num_decoder_layers": 1}),
    "LayoutLMModel": ("text", {}),
    "LongformerModel": ("text", {"attention_window": 16}),
    "MegatronBertModel": ("text", {}),
    "MobileBertModel": ("text", {"intra_bottleneck_size": 32, "true_hidden_size": 32,
                                 "embedding_size": 32, "num_feedforward_networks": 2}),
    "ModernBertModel": ("text", {"local_attention": 16, "global_attn_every_n_layers": 2}),
    "MPNetModel": ("text", {}),
    "NystromformerModel": ("text", {"num_landmarks": 8}),
    "RemBertModel": ("text", {"input_embedding_size": 64, "output_embedding_size": 128}),
    "RobertaModel": ("text", {}),
    "RobertaForMaskedLM": ("text", {}),
    "RoFormerModel": ("text", {}),
    "SqueezeBertModel": ("text", {}),
    "XLMRobertaModel": ("text", {}),
    "XLNetModel": ("text", {}),
    # decoders
    "BioGptForCausalLM": ("lm", {}),
    "BloomForCausalLM": ("lm", {}),
    "CodeGenForCausalLM": ("lm", {}),
    "CohereForCausalLM": ("lm", {}),
    "DeepseekV3ForCausalLM": ("lm", {"n_routed_experts": 4, "n_shared_experts": 1,
                                     "first_k_dense_replace": 1, "kv_lora_rank": 32,
                                     "q_lora_rank": 64, "qk_rope_head_dim": 16,
                                     "qk_nope_head_dim": 16, "v_head_dim": 32, "n_group": 1,
                                     "topk_group": 1, "num_key_value_heads": 4,
                                     "head_dim": 16}),
    "FalconForCausalLM": ("lm", {}),
    "GemmaForCausalLM": ("lm", {}),
    "Gemma2ForCausalLM": ("lm", {}),
    "Gemma3ForCausalLM": ("lm", {}),
    "GlmForCausalLM": ("lm", {}),
    "GPT2LMHeadModel": ("lm", {}),
    "GPTBigCodeForCausalLM": ("lm", {}),
    "GPTJForCausalLM": ("lm", {}),
    "GPTNeoForCausalLM": ("lm", {"attention_types": [[["global", "local"], 1]],
                                 "window_size": 16}),
    "GPTNeoXForCausalLM": ("lm", {}),
    "GraniteForCausalLM": ("lm", {}),
    "LlamaForCausalLM": ("lm", {}),
    "MistralForCausalLM": ("lm", {}),
    "MixtralForCausalLM": ("lm", {}),
    "MptForCausalLM": ("lm", {"expansion_ratio": 2, "max_seq_len": 512}),
    "OlmoForCausalLM": ("lm", {}),
    "Olmo2ForCausalLM": ("lm", {}),
    "OPTForCausalLM": ("lm", {}),
    "PhiForCausalLM": ("lm", {}),
    "Phi3ForCausalLM": ("lm", {}),
    "Qwen2ForCausalLM": ("lm", {}),
    "Qwen2MoeForCausalLM": ("lm", _MOE),
    "Qwen3ForCausalLM": ("lm", {}),
    "Qwen3MoeForCausalLM": ("lm", _MOE),
    "SmolLM3ForCausalLM": ("lm", {}),
    "StableLmForCausalLM": ("lm", {}),
    "Starcoder2ForCausalLM": ("lm", {}),
    "XGLMForCausalLM": ("lm", {}),
    # encoder-decoders
    "BartModel": ("s2s", {}),
    "BartForConditionalGeneration": ("s2s", {}),
    "BlenderbotSmallForConditionalGeneration": ("s2s", {}),
    "LEDForConditionalGeneration": ("s2s", {"attention_window": 16}),
    "M2M100ForConditionalGeneration": ("s2s", {}),
    "MarianMTModel": ("s2s", {}),
    "MBartForConditionalGeneration": ("s2s", {}),
    "MT5ForConditionalGeneration": ("s2s", {}),
    "PegasusForConditionalGeneration": ("s2s", {}),
    "PLBartForConditionalGeneration": ("s2s", {}),
    "ProphetNetForConditionalGeneration": ("s2s", {"ngram": 2, "num_buckets": 32}),
    "T5Model": ("s2s", {}),
    "T5ForConditionalGeneration": ("s2s", {}),
    # vision
    "BeitModel": ("image", _VIT),
    "BitModel": ("image", {"embedding_size": 64, "hidden_sizes": [128, 256, 512, 1024],
                           "depths": [1, 1, 1, 1]}),
    "ConvNextModel": ("image", _CONV4),
    "ConvNextV2Model": ("image", _CONV4),
    "CvtModel": ("image", {"embed_dim": [32, 64, 128], "num_heads": [1, 2, 4],
                           "depth": [1, 2, 3]}),  # Cvt indexes its drop-path rates by stage
    "Data2VecVisionModel": ("image", _VIT),
    "DeiTModel": ("image", _VIT),
    "Dinov2Model": ("image", _VIT),
    "EfficientNetModel": ("image", {"width_coefficient": 0.5, "depth_coefficient": 1.0,
                                    "hidden_dim": 640}),
    "FocalNetModel": ("image", {"embed_dim": 32, "depths": [1, 1, 1, 1],
                                "hidden_sizes": [64, 128, 256, 256]}),
    "LevitModel": ("image", {"image_size": 128, "patch_size": 16, "hidden_sizes": [64, 128, 192], "num_attention_heads": [2, 4, 6],
                             "depths": [1, 1, 1], "key_dim": [16, 16, 16]}),
    "MobileNetV2Model": ("image", {"depth_multiplier": 0.35}),
    "MobileViTModel": ("image", {"hidden_sizes": [32, 48, 64],
                                 "neck_hidden_sizes": [8, 16, 24, 32, 40, 48, 96]}),
    "PoolFormerModel": ("image", _CONV4),
    "RegNetModel": ("image", {"hidden_sizes": [32, 64, 128, 256], "depths": [1, 1, 1, 1],
                              "embedding_size": 32, "groups_width": 16}),
    "ResNetModel": ("image", {**_CONV4, "embedding_size": 32}),
    "SegformerModel": ("image", {"hidden_sizes": [16, 32, 64, 128], "depths": [1, 1, 1, 1],
                                 "num_attention_heads": [1, 1, 2, 4],
                                 "decoder_hidden_size": 64}),
    # Swin's relative position bias is made for its window: 224 / 4 = 56 -> 28, 14, 7 fit it
    "SwinModel": ("image", {"embed_dim": 32, "depths": [1, 1, 1, 1], "num_heads": [1, 2, 4, 8],
                            "patch_size": 4, "image_size": 224}),
    "Swinv2Model": ("image", {"embed_dim": 32, "depths": [1, 1, 1, 1],
                              "num_heads": [1, 2, 4, 8], "patch_size": 4}),
    "ViTModel": ("image", _VIT),
    "ViTForImageClassification": ("image", _VIT),
    "YolosModel": ("image", {"image_size": [64, 64], "patch_size": 8,
                             "num_detection_tokens": 10}),
    # audio
    "HubertModel": ("wav", _AUDIO_CONV),
    "Speech2TextModel": ("s2t", {"input_feat_per_channel": 40, "conv_channels": 64,
                                 "max_source_positions": 256}),
    "Wav2Vec2Model": ("wav", _AUDIO_CONV),
    "WhisperModel": ("whisper", {"num_mel_bins": 40}),
    "WhisperForConditionalGeneration": ("whisper", {"num_mel_bins": 40}),
    # text + image
    "BlipModel": ("clip", {"text_config": _TEXT_SUB, "vision_config": _VISION_SUB,
                           "projection_dim": 64, "image_text_hidden_size": 64}),
    "CLIPModel": ("clip", {"text_config": _TEXT_SUB, "vision_config": _VISION_SUB,
                           "projection_dim": 64}),
    "SiglipModel": ("clip", {"text_config": _TEXT_SUB, "vision_config": _VISION_SUB}),
}


def _hf_config(cls, overrides: dict, train: bool):
    """The class's config built with HF_SMALL's sizes (where the default config has that
    attribute as a plain integer) and the overrides; dropout and layer drop off in a training
    step (their random masks would differ between backends), no KV cache."""
    config_class = cls.config_class
    defaults = config_class()
    kwargs = {}
    for key, value in HF_SMALL.items():
        current = getattr(defaults, key, None)
        derived = isinstance(getattr(config_class, key, None), property)
        if isinstance(current, int) and not isinstance(current, bool) and not derived:
            kwargs[key] = value
    kwargs.update(overrides)
    cfg = config_class(**kwargs)
    for sub in (getattr(cfg, k, None) for k in ("text_config", "vision_config")):
        if sub is not None:
            _fix_token_ids(sub)
    _fix_token_ids(cfg)
    if train:
        for c in (cfg, getattr(cfg, "text_config", None), getattr(cfg, "vision_config", None)):
            for key in dir(c) if c is not None else ():
                if ("drop" in key or key == "layerdrop") and isinstance(getattr(c, key, None),
                                                                        float):
                    setattr(c, key, 0.0)
    if hasattr(cfg, "use_cache"):
        cfg.use_cache = False
    if getattr(cfg, "problem_type", "") is None:  # else the first loss sets it: a recompile
        cfg.problem_type = "single_label_classification"
    return cfg


def _fix_token_ids(cfg) -> None:
    vocab = getattr(cfg, "vocab_size", None)
    if not isinstance(vocab, int):
        return
    for i, key in enumerate(_TOKEN_IDS):
        value = getattr(cfg, key, None)
        if isinstance(value, int) and value >= vocab:
            setattr(cfg, key, min(i, vocab - 1))


def _hf_inputs(kind: str, cfg, cls_name: str, size: str, train: bool, gen) -> tuple[dict, str]:
    cuda = size == "cuda"
    b, s = (8, 128) if cuda else (2, 32)

    def ids(vocab, shape):
        return torch.randint(3, vocab, shape, generator=gen)

    def pixels(vcfg):
        hw = getattr(vcfg, "image_size", 64)  # convolutional models take any size
        hw = hw if isinstance(hw, int) else hw[0]
        channels = getattr(vcfg, "num_channels", 3)
        return torch.randn(b, channels, hw, hw, generator=gen), f"{b}x{channels}x{hw}x{hw}"

    if kind in ("text", "lm", "s2s"):
        vocab = cfg.vocab_size
        inputs = {"input_ids": ids(vocab, (b, s)), "attention_mask": torch.ones(b, s, dtype=torch.long)}
        desc = f"{b}x{s} tokens"
        if kind == "s2s":
            inputs["decoder_input_ids"] = ids(vocab, (b, s))
        if train and cls_name.endswith(("MaskedLM", "CausalLM", "LMHeadModel")):
            inputs["labels"] = inputs["input_ids"].clone()
        elif train and cls_name.endswith(("ConditionalGeneration", "MTModel")):
            inputs["labels"] = inputs["decoder_input_ids"].clone()
        elif train and cls_name.endswith("SequenceClassification"):
            inputs["labels"] = torch.randint(0, cfg.num_labels, (b,), generator=gen)
        return inputs, desc
    if kind == "image":
        x, desc = pixels(cfg)
        inputs = {"pixel_values": x}
        if train and cls_name.endswith("ImageClassification"):
            inputs["labels"] = torch.randint(0, cfg.num_labels, (b,), generator=gen)
        return inputs, desc
    if kind == "clip":
        x, desc = pixels(cfg.vision_config)
        t = min(s, cfg.text_config.max_position_embeddings)
        return {"input_ids": ids(cfg.text_config.vocab_size, (b, t)), "pixel_values": x,
                "attention_mask": torch.ones(b, t, dtype=torch.long)}, f"{b}x{t} tokens, {desc}"
    if kind == "whisper":  # the encoder's input is 2 x max_source_positions frames long
        frames = 2 * cfg.max_source_positions
        inputs = {"input_features": torch.randn(b, cfg.num_mel_bins, frames, generator=gen),
                  "decoder_input_ids": ids(cfg.vocab_size, (b, s // 2))}
        if train and cls_name.endswith("ConditionalGeneration"):
            inputs["labels"] = inputs["decoder_input_ids"].clone()
        return inputs, f"{b}x{cfg.num_mel_bins}x{frames} features, {s // 2} tokens"
    if kind == "s2t":
        frames = 4 * s
        feats = cfg.input_feat_per_channel * cfg.input_channels
        return {"input_features": torch.randn(b, frames, feats, generator=gen),
                "attention_mask": torch.ones(b, frames, dtype=torch.long),
                "decoder_input_ids": ids(cfg.vocab_size, (b, s))}, f"{b}x{frames}x{feats} features"
    if kind == "wav":
        samples = 16000 if cuda else 4000
        return {"input_values": torch.randn(b, samples, generator=gen)}, f"{b}x{samples} samples"
    raise ValueError(f"unknown input kind {kind!r}")


def _hf_builder(cls_name: str, kind: str, overrides: dict):
    def build(size: str, train: bool, seed: int) -> Example:
        import transformers

        cls = getattr(transformers, cls_name)
        overrides_now = dict(overrides)
        if cls_name.startswith("Nystromformer"):
            overrides_now["segment_means_seq_len"] = 128 if size == "cuda" else 32
        cfg = _hf_config(cls, overrides_now, train)
        torch.manual_seed(seed)
        model = cls(cfg)
        gen = torch.Generator().manual_seed(seed)
        inputs, desc = _hf_inputs(kind, cfg, cls_name, size, train, gen)
        return Example(_finish(model, train), (), inputs, desc=desc, has_loss="labels" in inputs)

    return build


def hf_entries() -> list[Entry]:
    if missing("hf"):
        return []
    import transformers

    return [Entry(f"hf/{name}", "hf", kind, _hf_builder(name, kind, overrides))
            for name, (kind, overrides) in sorted(HF_MODELS.items())
            if hasattr(transformers, name)]


# --------------------------------------------------------------------------------------------
# the population
# --------------------------------------------------------------------------------------------

_ENTRIES = {"timm": timm_entries, "torchvision": tv_entries, "hf": hf_entries}


def population(families: tuple = FAMILIES) -> list[Entry]:
    """Every entry of the families, in a fixed order: by family (timm, torchvision, hf), then
    by name."""
    out = []
    for family in FAMILIES:
        if family in families:
            out.extend(sorted(_ENTRIES[family](), key=lambda e: e.name))
    return out


def family_of(name: str) -> str | None:
    for family, prefix in PREFIX.items():
        if name.startswith(prefix):
            return family
    return None


def find(name: str) -> Entry:
    """The entry of that full name ("hf/BertModel")."""
    family = family_of(name)
    if family is None:
        raise KeyError(f"{name!r}: a zoo model's name starts with timm/, tv/ or hf/")
    for entry in population((family,)):
        if entry.name == name:
            return entry
    why = missing(family)
    raise KeyError(f"{name!r} is not in the zoo's population" + (f" ({why})" if why else ""))
