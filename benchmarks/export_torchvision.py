"""Export torchvision models to ONNX the way a PyTorch user does, for ``e2e.py --models FILE.onnx``.

Each model is built with random weights (``weights=None``, torchvision's own initialisation),
put in eval mode and exported for a ``1x3xSxS`` input (S = 224; 299 for inception_v3) with
``torch.onnx.export``: ``--exporter dynamo`` (torch's default since 2.9: opset 18+, ``ReduceMean``
over axes ``[-1, -2]``, ``BatchNormalization`` kept, ``Split`` for channel splits) and/or
``torchscript`` (the legacy exporter, opset 17: BN folded into the convs, ``Identity`` nodes,
ShuffleNet's shape arithmetic). Files are named ``OUT/MODEL.EXPORTER.onnx``.

It needs ``torch``, ``torchvision`` and (for dynamo) ``onnxscript``, which graphtune does not
depend on: run it with an interpreter that has them, e.g. a separate virtualenv, and time the
files with graphtune's. It imports no graphtune.

Examples
--------
``python -m venv /tmp/tv && /tmp/tv/bin/pip install torch torchvision onnxscript``
``/tmp/tv/bin/python benchmarks/export_torchvision.py --out out/exported``
``.venv/bin/python benchmarks/e2e.py --suite --models $(ls out/exported/*.dynamo.onnx | paste -sd,)``
``/tmp/tv/bin/python benchmarks/export_torchvision.py --exporter torchscript --models
ssdlite320_mobilenet_v3_large`` (a detector with its post-processing, for
``benchmarks/partition_detector.py --model FILE``)
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

MODELS = ("resnet18", "resnet50", "resnext50_32x4d", "regnet_y_800mf", "mobilenet_v2",
          "mobilenet_v3_large", "efficientnet_b0", "shufflenet_v2_x1_0", "googlenet",
          "inception_v3", "densenet121", "vgg16")
"""The torchvision counterparts of graphtune's zoo (SSD and the U-Net have none)."""
DETECTORS = ("ssdlite320_mobilenet_v3_large", "fasterrcnn_mobilenet_v3_large_320_fpn",
             "retinanet_resnet50_fpn", "maskrcnn_resnet50_fpn")
"""torchvision detectors with their post-processing (NMS, ...), exported for one 3x320x320 image."""
DETECTOR_SIZE = 320
EXPORTERS = ("dynamo", "torchscript")


def _import_torchvision():
    """torchvision, also where its compiled ops do not load (a CPU-only torch beside a
    torchvision wheel built for another torch: the model definitions need none of them)."""
    import torch

    try:
        import torchvision
    except RuntimeError as err:  # "operator torchvision::nms does not exist"
        if "torchvision::" not in str(err):
            raise
        for name in [m for m in sys.modules if m.startswith("torchvision")]:
            del sys.modules[name]
        real = torch.library.register_fake
        torch.library.register_fake = lambda *args, **kwargs: (lambda fn: fn)
        try:
            import torchvision
        finally:
            torch.library.register_fake = real
    return torch, torchvision


def _constructor(torchvision, name: str):
    """The builder of torchvision's model ``name`` (classification first, then segmentation:
    ``deeplabv3_mobilenet_v3_large``, ``lraspp_mobilenet_v3_large``, ``fcn_resnet50`` ...), or None."""
    for module in (torchvision.models, torchvision.models.segmentation, torchvision.models.detection):
        builder = getattr(module, name, None)
        if callable(builder):
            return builder
    return None


def export(name: str, exporter: str, out: str, score_thresh: float | None = None) -> str:
    """Export torchvision's ``name`` with ``exporter``; the path of the ``.onnx`` file written.

    ``score_thresh`` (detectors only) replaces the detector's score threshold (see
    :func:`_export_detector`)."""
    torch, torchvision = _import_torchvision()
    torch.manual_seed(0)
    if name in DETECTORS:
        return _export_detector(torch, torchvision, name, exporter, out, score_thresh)
    size = 299 if name == "inception_v3" else 224
    kwargs = {"aux_logits": False, "init_weights": True} if name in ("googlenet", "inception_v3") else {}
    builder = _constructor(torchvision, name)
    if builder is not getattr(torchvision.models, name, None):
        kwargs = {"weights_backbone": None}  # segmentation: no pretrained backbone to download
    model = builder(weights=None, **kwargs).eval()
    x = torch.randn(1, 3, size, size)
    path = os.path.join(out, f"{name}.{exporter}.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "dynamo":
            torch.onnx.export(model, (x,), path, dynamo=True, external_data=False)
        else:
            torch.onnx.export(model, (x,), path, dynamo=False, opset_version=17,
                              input_names=["input"], output_names=["output"])
    return path


def _export_detector(torch, torchvision, name: str, exporter: str, out: str,
                     score_thresh: float | None = None) -> str:
    """A detector as torchvision's detection docs export it: the model takes a list of 3-D
    images (one, ``DETECTOR_SIZE`` square, its transform resizing to the same size) and returns
    boxes, labels, scores (and masks) after its post-processing.

    With random weights every class score is near 1 / classes, below torchvision's default
    thresholds (0.05 for the R-CNNs, 0.001 for SSDlite, 0.05 for RetinaNet), so the model
    detects nothing and its region heads run on no rows; ``score_thresh`` (e.g. 0) replaces
    that threshold so that they run on a full set of detections (file ``NAME.scoreT.EXPORTER.onnx``)."""
    builder = getattr(torchvision.models.detection, name)
    kwargs: dict = ({} if name.startswith("ssdlite") else
                    {"min_size": DETECTOR_SIZE, "max_size": DETECTOR_SIZE})
    if score_thresh is not None:
        one_stage = name.startswith(("ssdlite", "retinanet"))
        kwargs["score_thresh" if one_stage else "box_score_thresh"] = score_thresh
    model = builder(weights=None, weights_backbone=None, **kwargs).eval()
    image = torch.rand(3, DETECTOR_SIZE, DETECTOR_SIZE)
    stem = name if score_thresh is None else f"{name}.score{score_thresh:g}"
    path = os.path.join(out, f"{stem}.{exporter}.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "dynamo":
            torch.onnx.export(model, ([image],), path, dynamo=True, external_data=False)
        else:
            torch.onnx.export(model, ([image],), path, dynamo=False, opset_version=17,
                              input_names=["image"])
    return path


def main(argv: list[str] | None = None) -> int:
    """Command line entry point (see ``--help``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS),
                        help="comma-separated torchvision classification, segmentation or "
                             f"detection models (default: {','.join(MODELS)}; detectors: "
                             f"{','.join(DETECTORS)})")
    parser.add_argument("--exporter", default="dynamo", choices=EXPORTERS + ("both",),
                        help="torch.onnx exporter (default dynamo, torch's default)")
    parser.add_argument("--out", default="out/exported", help="folder for the .onnx files")
    parser.add_argument("--score-thresh", type=float, default=None,
                        help="detectors: this score threshold instead of torchvision's (with "
                             "random weights 0 makes their heads run on a full set of detections)")
    args = parser.parse_args(argv)
    names = [n for n in args.models.split(",") if n]
    exporters = EXPORTERS if args.exporter == "both" else (args.exporter,)
    try:
        _, torchvision = _import_torchvision()
    except ImportError as err:
        parser.error(f"{err}; run this script with a Python that has torch and torchvision "
                     "(pip install torch torchvision onnxscript)")
    unknown = [n for n in names if _constructor(torchvision, n) is None]
    if unknown:
        parser.error(f"--models: not torchvision models: {', '.join(unknown)}")
    os.makedirs(args.out, exist_ok=True)
    failed = 0
    for name in names:
        for exporter in exporters:
            start = time.time()
            try:
                path = export(name, exporter, args.out, args.score_thresh)
            except Exception as err:  # an exporter failure is the exporter's: report it and go on
                failed += 1
                print(f"{name} ({exporter}): export failed: {type(err).__name__}: {err}", flush=True)
                continue
            print(f"{path} ({time.time() - start:.1f} s)", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
