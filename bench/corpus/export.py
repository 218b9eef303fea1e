#!/usr/bin/env python3
"""Exports the real-model corpus: architectures nobody on this project wrote, as their libraries define them.

Runs under the corpus venv (bench/corpus/setup.sh: torch, torchvision, timm, transformers from PyPI):

    /work/venv-corpus/bin/python bench/corpus/export.py --out DIR [--only NAME,...] [--list]

Every model is built from its library's standard configuration with random weights (no hub, no download:
nothing but PyPI is reachable here) under a fixed seed, and exported by torch.onnx: the TorchScript exporter
at opset 17 by default, and a subset again at opset 13 and through the dynamo exporter (opset 18), since each
exporter writes the same layers in another form (zero-initialised matrices and fresh BatchNorm statistics
randomised: see randomize_untrained_state). Writes DIR/<name>/model.onnx (+ external data where the
exporter writes it), DIR/<name>/inputs.npz (the inputs, keyed by graph input name) and DIR/<name>/meta.json
(family, library and version, exporter, opset). A model whose export fails is reported and skipped: the
exporter's failure is not nnc's. The models' own outputs are not kept: run.py takes ONNX Runtime's on the
exported file as the reference.
"""
import argparse
import json
import os
import sys
import time
import traceback

import numpy as np
import torch
import torch.nn as nn

SEQ = 128  # sequence length of the text models
IMAGE = (1, 3, 224, 224)


def image(shape=IMAGE):
    return {"input": torch.randn(*shape)}


def text(vocab, mask=True, seq=SEQ):
    ids = torch.randint(0, vocab, (1, seq), dtype=torch.int64)
    return {"input_ids": ids, **({"attention_mask": torch.ones(1, seq, dtype=torch.int64)} if mask else {})}


class FirstOutput(nn.Module):
    """HuggingFace models return ModelOutput objects: export the tensor a user reads (last_hidden_state)."""

    def __init__(self, model, names):
        super().__init__()
        self.model, self.names = model, names

    def forward(self, *args):
        out = self.model(**dict(zip(self.names, args)), return_dict=True)
        return out[0]


# ---------------------------------------------------------------------------------------------------------------
# The builders. Each returns (module, inputs); `family` groups the table.

def torchvision_model(name, shape=IMAGE, **kw):
    def build():
        import torchvision
        return torchvision.models.get_model(name, weights=None, **kw), image(shape)
    return build


def timm_model(name, shape=IMAGE):
    def build():
        import timm
        return timm.create_model(name, pretrained=False), image(shape)
    return build


def hf_model(config_name, model_name, inputs, **config):
    def build():
        import transformers
        cfg = getattr(transformers, config_name)(**config)
        cfg.use_cache = False
        model = getattr(transformers, model_name)(cfg)
        feed = inputs(cfg)
        return FirstOutput(model, list(feed)), feed
    return build


def stock_transformer_encoder():
    layer = nn.TransformerEncoderLayer(768, 12, 3072, batch_first=True)
    return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False), {"src": torch.randn(1, SEQ, 768)}


class StockDecoder(nn.Module):
    """nn.TransformerDecoder with a causal self-attention mask over a memory, as seq2seq tutorials write it."""

    def __init__(self):
        super().__init__()
        self.decoder = nn.TransformerDecoder(nn.TransformerDecoderLayer(512, 8, 2048, batch_first=True), 2)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(64))

    def forward(self, tgt, memory):
        return self.decoder(tgt, memory, tgt_mask=self.mask, tgt_is_causal=True)


class SpeechLSTM(nn.Module):
    """A two-layer LSTM acoustic model over 80 mel bins (speech front ends and keyword spotters)."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(80, 256, num_layers=2, batch_first=True)
        self.head = nn.Linear(256, 32)

    def forward(self, x):
        return self.head(self.lstm(x)[0])


class BiGRU(nn.Module):
    """A bidirectional GRU tagger with initial state (time-series and text taggers)."""

    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(64, 128, batch_first=True, bidirectional=True)
        self.head = nn.Linear(256, 8)

    def forward(self, x, h0):
        return self.head(self.gru(x, h0)[0])


def stock(module_class, inputs):
    return lambda: (module_class(), inputs())


def encoder_inputs(cfg):
    return text(cfg.vocab_size)


def decoder_inputs(cfg):
    # With an attention mask, as generation code calls them (without one, transformers' mask builder looks
    # for packed sequences with torch.diff, which the TorchScript exporter lacks).
    return text(cfg.vocab_size)


def whisper_inputs(cfg):
    return {"input_features": torch.randn(1, cfg.num_mel_bins, 3000)}


def audio_inputs(cfg):
    return {"input_values": torch.randn(1, 16000)}


def vision_inputs(cfg):
    return {"pixel_values": torch.randn(1, 3, cfg.image_size, cfg.image_size)}


# name: (family, library, builder, extra exporters)
MODELS = {
    # torchvision CNNs and transformers
    "resnet18": ("cnn", "torchvision", torchvision_model("resnet18"), ["ts13", "dynamo"]),
    "resnet50": ("cnn", "torchvision", torchvision_model("resnet50"), ["dynamo"]),
    "resnext50_32x4d": ("cnn", "torchvision", torchvision_model("resnext50_32x4d"), []),
    "mobilenet_v2": ("cnn", "torchvision", torchvision_model("mobilenet_v2"), ["ts13"]),
    "mobilenet_v3_small": ("cnn", "torchvision", torchvision_model("mobilenet_v3_small"), []),
    "mobilenet_v3_large": ("cnn", "torchvision", torchvision_model("mobilenet_v3_large"), ["dynamo"]),
    "efficientnet_b0": ("cnn", "torchvision", torchvision_model("efficientnet_b0"), []),
    "densenet121": ("cnn", "torchvision", torchvision_model("densenet121"), []),
    "convnext_tiny": ("cnn", "torchvision", torchvision_model("convnext_tiny"), ["dynamo"]),
    "regnet_y_400mf": ("cnn", "torchvision", torchvision_model("regnet_y_400mf"), []),
    "shufflenet_v2_x1_0": ("cnn", "torchvision", torchvision_model("shufflenet_v2_x1_0"), []),
    "squeezenet1_1": ("cnn", "torchvision", torchvision_model("squeezenet1_1"), []),
    "mnasnet1_0": ("cnn", "torchvision", torchvision_model("mnasnet1_0"), []),
    "googlenet": ("cnn", "torchvision", torchvision_model("googlenet", aux_logits=False, init_weights=True), []),
    "alexnet": ("cnn", "torchvision", torchvision_model("alexnet"), []),
    "vit_b_16": ("vision transformer", "torchvision", torchvision_model("vit_b_16"), []),
    "swin_t": ("vision transformer", "torchvision", torchvision_model("swin_t"), []),
    # timm
    "timm_deit_small": ("vision transformer", "timm", timm_model("deit_small_patch16_224"), []),
    "timm_mobilevit_xs": ("vision transformer", "timm", timm_model("mobilevit_xs", (1, 3, 256, 256)), []),
    "timm_levit_128s": ("vision transformer", "timm", timm_model("levit_128s"), []),
    "timm_poolformer_s12": ("cnn", "timm", timm_model("poolformer_s12"), []),
    "timm_convnextv2_atto": ("cnn", "timm", timm_model("convnextv2_atto"), []),
    "timm_ghostnet_100": ("cnn", "timm", timm_model("ghostnet_100"), []),
    "timm_mixer_s16": ("mlp", "timm", timm_model("mixer_s16_224"), []),
    "timm_efficientnet_lite0": ("cnn", "timm", timm_model("tf_efficientnet_lite0"), []),
    "timm_edgenext_xx_small": ("cnn", "timm", timm_model("edgenext_xx_small", (1, 3, 256, 256)), []),
    "timm_regnetx_002": ("cnn", "timm", timm_model("regnetx_002"), []),
    # HuggingFace transformers, standard configurations, random weights
    "hf_bert_base": ("encoder", "transformers", hf_model("BertConfig", "BertModel", encoder_inputs), ["ts14", "dynamo"]),
    "hf_distilbert": ("encoder", "transformers", hf_model("DistilBertConfig", "DistilBertModel", encoder_inputs), []),
    "hf_roberta_base": ("encoder", "transformers", hf_model("RobertaConfig", "RobertaModel", encoder_inputs,
                                                            vocab_size=50265, max_position_embeddings=514,
                                                            pad_token_id=1), []),
    "hf_albert_base": ("encoder", "transformers", hf_model("AlbertConfig", "AlbertModel", encoder_inputs,
                                                           hidden_size=768, num_attention_heads=12,
                                                           intermediate_size=3072), []),
    "hf_electra_small": ("encoder", "transformers", hf_model("ElectraConfig", "ElectraModel", encoder_inputs), []),
    "hf_deberta_v2_small": ("encoder", "transformers", hf_model("DebertaV2Config", "DebertaV2Model", encoder_inputs,
                                                                hidden_size=768, num_hidden_layers=6,
                                                                num_attention_heads=12, intermediate_size=3072,
                                                                vocab_size=128100, relative_attention=True,
                                                                position_buckets=256, pos_att_type=["p2c", "c2p"],
                                                                max_relative_positions=-1), []),
    "hf_gpt2": ("decoder", "transformers", hf_model("GPT2Config", "GPT2Model", decoder_inputs), ["dynamo"]),
    # SmolLM2-135M's configuration: Llama with grouped-query attention (9 heads, 3 KV heads), RMSNorm, rotary.
    "hf_llama_smollm2_135m": ("decoder", "transformers", hf_model(
        "LlamaConfig", "LlamaModel", decoder_inputs, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
        num_attention_heads=9, num_key_value_heads=3, vocab_size=49152, rope_theta=100000.0,
        max_position_embeddings=8192, tie_word_embeddings=True), ["dynamo"]),
    # Qwen2.5-0.5B's layer configuration (14 heads, 2 KV heads, QKV bias), 4 of its 24 layers.
    "hf_qwen2_4layer": ("decoder", "transformers", hf_model(
        "Qwen2Config", "Qwen2Model", decoder_inputs, hidden_size=896, intermediate_size=4864, num_hidden_layers=4,
        num_attention_heads=14, num_key_value_heads=2, vocab_size=151936, rope_theta=1000000.0), []),
    "hf_t5_small_encoder": ("encoder-decoder", "transformers", hf_model(
        "T5Config", "T5EncoderModel", encoder_inputs, d_model=512, d_ff=2048, num_layers=6, num_heads=8,
        d_kv=64), []),
    "hf_bart_base_encoder": ("encoder-decoder", "transformers", lambda: bart_encoder(), []),
    "hf_whisper_tiny_encoder": ("speech", "transformers", lambda: whisper_encoder(), []),
    "hf_wav2vec2_base": ("speech", "transformers", hf_model("Wav2Vec2Config", "Wav2Vec2Model", audio_inputs), []),
    "hf_vit_base": ("vision transformer", "transformers", hf_model("ViTConfig", "ViTModel", vision_inputs), []),
    # PyTorch's stock layers
    "torch_transformer_encoder": ("encoder", "torch.nn", stock_transformer_encoder, []),
    "torch_transformer_decoder": ("decoder", "torch.nn", stock(StockDecoder, lambda: {
        "tgt": torch.randn(1, 64, 512), "memory": torch.randn(1, 96, 512)}), []),
    "torch_lstm_speech": ("rnn", "torch.nn", stock(SpeechLSTM, lambda: {"x": torch.randn(1, 100, 80)}), []),
    "torch_bigru_tagger": ("rnn", "torch.nn", stock(BiGRU, lambda: {"x": torch.randn(1, 50, 64),
                                                                     "h0": torch.randn(2, 1, 128)}), []),
}


def bart_encoder():
    import transformers
    cfg = transformers.BartConfig()  # bart-base's sizes are BartConfig's defaults
    model = transformers.BartModel(cfg).get_encoder()
    feed = text(cfg.vocab_size)
    return FirstOutput(model, list(feed)), feed


def whisper_encoder():
    import transformers
    cfg = transformers.WhisperConfig(d_model=384, encoder_layers=4, encoder_attention_heads=6, decoder_layers=4,
                                     decoder_attention_heads=6, encoder_ffn_dim=1536, decoder_ffn_dim=1536)
    model = transformers.WhisperModel(cfg).get_encoder()  # whisper-tiny's sizes
    feed = whisper_inputs(cfg)
    return FirstOutput(model, list(feed)), feed


def randomize_untrained_state(module):
    """Random weights as the libraries initialise them, but for two things that would make a check blind: a
    matrix initialised to zero (torchvision's ViT head: every output 0) and BatchNorm's fresh statistics
    (mean 0, variance 1, weight 1, bias 0: an identity that hides scale and shift bugs)."""
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in module.parameters():
            if p.dim() >= 2 and not p.any():
                p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
        for m in module.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.running_mean is not None:
                c = m.num_features
                m.running_mean.copy_(torch.randn(c, generator=gen) * 0.1)
                m.running_var.copy_(torch.rand(c, generator=gen) + 0.5)
                if m.affine:
                    m.weight.copy_(torch.rand(c, generator=gen) + 0.5)
                    m.bias.copy_(torch.randn(c, generator=gen) * 0.1)


def export(module, feed, path, exporter):
    names = list(feed)
    args = tuple(feed.values())
    if exporter == "dynamo":
        program = torch.onnx.export(module, args, dynamo=True, input_names=names, optimize=True)
        program.save(path, external_data=False)  # every model here is under protobuf's 2 GB
        return 18
    opset = int(exporter[2:])
    torch.onnx.export(module, args, path, dynamo=False, opset_version=opset, input_names=names,
                      do_constant_folding=True)
    return opset


def variants():
    for name, (family, library, build, extra) in MODELS.items():
        yield name, family, library, build, "ts17"
        for exporter in extra:
            yield f"{name}@{exporter}", family, library, build, exporter


def library_version(library):
    module = {"torch.nn": "torch"}.get(library, library)
    return __import__(module).__version__


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--only", default="")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--force", action="store_true", help="re-export models already in --out")
    args = parser.parse_args()
    only = set(filter(None, args.only.split(",")))
    failed = []
    for name, family, library, build, exporter in variants():
        if args.list:
            print(name, family, library, exporter)
            continue
        if only and name not in only and name.split("@")[0] not in only:
            continue
        case = os.path.join(args.out, name)
        if os.path.exists(os.path.join(case, "meta.json")) and not args.force:
            continue
        os.makedirs(case, exist_ok=True)
        torch.manual_seed(0)
        started = time.time()
        try:
            module, feed = build()
            module.eval()
            randomize_untrained_state(module)
            # nn.MultiheadAttention and the stock nn.Transformer layers take a fused fast path under no_grad
            # that the TorchScript exporter cannot read (torchvision's ViT, for one), so export as trained
            # code runs them: with autograd on (the exporter traces the same math).
            with torch.set_grad_enabled(True):
                opset = export(module, feed, os.path.join(case, "model.onnx"), exporter)
        except Exception as e:  # an exporter failure is reported, not fatal
            failed.append(name)
            print(f"{name}: export failed: {type(e).__name__}: {str(e).splitlines()[0][:300]}", file=sys.stderr)
            traceback.print_exc(limit=2, file=open(os.path.join(case, "export_error.txt"), "w"))
            continue
        np.savez(os.path.join(case, "inputs.npz"), **{k: v.numpy() for k, v in feed.items()})
        meta = {"name": name, "family": family, "source": f"{library}=={library_version(library)}",
                "exporter": ("torch.onnx dynamo" if exporter == "dynamo" else "torch.onnx TorchScript") +
                f" (torch {torch.__version__})", "opset": opset}
        with open(os.path.join(case, "meta.json"), "w") as f:
            json.dump(meta, f, indent=1)
        print(f"{name}: exported ({exporter}, {time.time() - started:.0f} s)", flush=True)
    if failed:
        print(f"{len(failed)} failed: {', '.join(failed)}", file=sys.stderr)


if __name__ == "__main__":
    main()
