"""The check of the config against the model it names: what the model file's contract says
wins, and a model the daemon cannot feed is refused before anything starts."""

from __future__ import annotations

from typing import Any

from edge_hf.core.contract import CHANNEL_ORDER, POSE_MODEL
from edge_hf.core.errors import UserError
from edge_hf.daemon.config.schema import Config


def check_against_model(cfg: Config, contract: Any, source: str = "config") -> None:
    """Refuse settings that contradict the model's metadata, and models the daemon cannot feed;
    and cameras that insist on a hardware decoder this machine does not have."""
    # (Lazy: both bring in OpenCV, which reading a config does not need.)
    from edge_hf.core.personcrop import rule_of
    from edge_hf.daemon.sources import hardware_decoder

    for i, cam in enumerate(cfg.cameras):
        if cam.enabled and cam.decoder == "hardware" and not hardware_decoder():
            raise UserError(
                f"{source}: cameras[{i}].decoder: hardware needs OpenCV with GStreamer and its "
                "nvv4l2decoder element (a Jetson with JetPack); this machine has not: use auto"
            )

    if contract.channel_order != CHANNEL_ORDER:
        raise UserError(
            f"{source}: {cfg.model.path} has channel order {contract.channel_order!r}; the "
            f"daemon stacks frames as {CHANNEL_ORDER!r}: re-export it with edge-hf export"
        )
    if cfg.model.window is not None and cfg.model.window != contract.window:
        raise UserError(
            f"{source}: model.window = {cfg.model.window} but {cfg.model.path} was trained with "
            f"T={contract.window}; remove the key or use the matching model"
        )
    if cfg.model.input_size is not None and tuple(cfg.model.input_size) != tuple(
        contract.input_size
    ):
        raise UserError(
            f"{source}: model.input_size = {list(cfg.model.input_size)} but {cfg.model.path} "
            f"expects {list(contract.input_size)}"
        )
    rule = rule_of(contract)
    if rule is not None:
        if cfg.person.model is None:
            raise UserError(
                f"{source}: {cfg.model.path} was trained on person-centred windows "
                "(edge_hf.crop: person) and needs the person stage: set person.model "
                f"({POSE_MODEL}), or use a full-frame model"
            )
        rate = rule.rate_hz
        if abs(cfg.person.rate_hz - rate) > 1e-6:
            raise UserError(
                f"{source}: person.rate_hz = {cfg.person.rate_hz:g} but {cfg.model.path} was "
                f"trained with person boxes at {rate:g} Hz; set person.rate_hz: {rate:g}"
            )
    for i, cam in enumerate(cfg.cameras):
        if cam.interval_ms is not None and abs(cam.interval_ms - contract.interval_ms) > 1e-6:
            raise UserError(
                f"{source}: cameras[{i}].interval_ms = {cam.interval_ms:g} but {cfg.model.path} "
                f"was trained at {contract.interval_ms:g} ms; remove the key to use the model's"
            )
