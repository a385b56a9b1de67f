"""Optimization-profile checks of the reference builder and runtime: every dynamic input needs a profile with
1 <= min <= opt <= max that agrees with its static dims, every shape tensor input needs values in each profile, and
a run's shapes must fit the chosen profile. Kept apart from the plan format, which only stores the profiles."""

from __future__ import annotations

import math

from .core import NetworkError


def _topological(network) -> list:
    from .plan import _topological as order  # the plan module owns the one layer order builds and runs use

    return order(network)


def check_profile(name: str, shape, profile_shapes) -> str | None:
    """None if `shape` fits [min, max] of the profile, else the reason."""
    mn, _, mx = profile_shapes
    if len(shape) != len(mn):
        return f"input '{name}': rank {len(shape)} differs from the engine's rank {len(mn)}"
    for i, (d, lo, hi) in enumerate(zip(shape, mn, mx)):
        if not lo <= d <= hi:
            return f"input '{name}': dimension {i} is {d}, outside the optimization profile range [{lo}, {hi}]"
    return None


def validate_profiles(network, profiles: list[dict], shape_values: list[dict] | None = None) -> None:
    """Each dynamic input needs a profile; profiles must satisfy min <= opt <= max and match static dims.
    Each shape tensor input needs its values in every profile (set_shape_input), and none other has them."""
    shape_values = shape_values or [{} for _ in profiles]
    from .shape_values import shape_input_names

    shape_inputs = shape_input_names(network)
    for t in network._inputs:
        if t.name in shape_inputs and not profiles:
            raise NetworkError(f"input '{t.name}' is a shape tensor: add an optimization profile with "
                               "set_shape_input")
        for k, values in enumerate(shape_values):
            _check_shape_values(t, k, values.get(t.name), t.name in shape_inputs)
    for t in network._inputs:
        dynamic = any(d < 0 for d in t.shape)
        if dynamic and not profiles:
            raise NetworkError(f"input '{t.name}' has dynamic shape {tuple(t.shape)}: add an optimization "
                               "profile with set_shape")
        for k, prof in enumerate(profiles):
            if t.name not in prof:
                if dynamic:
                    raise NetworkError(f"optimization profile {k} has no shapes for dynamic input '{t.name}'")
                continue
            mn, opt, mx = prof[t.name]
            if not len(mn) == len(opt) == len(mx) == len(t.shape):
                raise NetworkError(f"optimization profile {k}, input '{t.name}': min/opt/max ranks must equal the "
                                   f"input rank {len(t.shape)}")
            for i, (d, a, b, c) in enumerate(zip(t.shape, mn, opt, mx)):
                if not 1 <= a <= b <= c:
                    raise NetworkError(f"optimization profile {k}, input '{t.name}' dim {i}: need 1 <= min <= opt <= "
                                       f"max, got {a}, {b}, {c}")
                if d >= 0 and not a == b == c == d:
                    raise NetworkError(f"optimization profile {k}, input '{t.name}' dim {i} is static ({d}) but the "
                                       f"profile gives {a}/{b}/{c}")
    for k, prof in enumerate(profiles):
        _check_profile_shapes(network, k, prof, shape_values[k])


def _check_shape_values(t, k: int, values, is_shape: bool) -> None:
    """The set_shape_input values of profile k for input t (None: not given)."""
    if values is None:
        if is_shape:
            raise NetworkError(f"optimization profile {k} has no values for shape tensor input '{t.name}' (call "
                               "set_shape_input)")
        return
    if not is_shape:
        raise NetworkError(f"optimization profile {k} gives values for input '{t.name}', which is not a shape "
                           "tensor (set_shape_input is for inputs that layers read as shapes)")
    count = math.prod(t.shape)
    for which, v in zip(("min", "opt", "max"), values):
        if len(v) != count:
            raise NetworkError(f"optimization profile {k}, shape input '{t.name}': {which} has {len(v)} values, the "
                               f"input {count}")
    for i, (a, b, c) in enumerate(zip(*values)):
        if not a <= b <= c:
            raise NetworkError(f"optimization profile {k}, shape input '{t.name}' value {i}: need min <= opt <= max, "
                               f"got {a}, {b}, {c}")


def _shapes_at(network, which: int, prof: dict, on_error, shape_values: dict | None = None):
    """Shape inference of the needed layers with every input at its min (0), opt (1) or max (2)
    profile shape (and shape tensor inputs at those profile values); on_error(layer, error, input
    shapes) gives the outputs where inference fails."""
    from .infer import infer_layer
    from .ops import op_for
    from .shape_values import needed, record

    layers = _topological(network)
    shapes = {id(t): tuple(prof[t.name][which]) if t.name in prof else tuple(t.shape) for t in network._inputs}
    dtypes = {id(t): t.dtype for t in network._inputs}
    values = {id(t): tuple(shape_values[t.name][which]) for t in network._inputs if t.name in (shape_values or {})}
    need = needed((type(layer), [None if t is None else id(t) for t in layer._inputs],
                   [id(t) for t in layer._outputs]) for layer in layers)
    for layer in layers:
        ins = [None if t is None else shapes.get(id(t)) for t in layer._inputs]
        in_types = [None if t is None else dtypes.get(id(t), t.dtype) for t in layer._inputs]
        keys = [None if t is None else id(t) for t in layer._inputs]
        try:
            outs, dts = infer_layer(layer._TYPE, layer._params, layer._weights, ins, in_types, layer.name,
                                    plugin=getattr(layer, "_plugin", None), values=[values.get(k) for k in keys],
                                    keys=keys)
            record(op_for(layer._TYPE), layer._params, layer._weights, ins, in_types, keys,
                   [id(t) for t in layer._outputs], outs, dts, values, need, layer.name)
        except NetworkError as e:
            outs, dts = on_error(layer, e, ins, in_types)
        for t, s, d in zip(layer._outputs, outs, dts):
            shapes[id(t)], dtypes[id(t)] = tuple(s), d
    return shapes


def _check_profile_shapes(network, k: int, prof: dict, shape_values: dict | None = None) -> None:
    """The build-time shape checks TensorRT-RTX makes with a profile ("kOPT values for profile 0 violate
    shape constraints"), as observed: a reshape or slice must work at the opt shapes; any other layer
    that fails at opt but works at max is rejected too (a dim that fails at max as well is taken to be
    1 there, left to run time); a scale layer's weight count must fit some input shape between min
    and max (a CHANNEL dim unknown at build time, or the volume an ELEMENTWISE scale covers)."""
    from .enums import LayerType, ScaleMode

    failures: list[dict] = [{}, {}, {}]
    shapes = []
    for which in range(3):
        def on_error(layer, error, ins, in_types, which=which):
            failures[which][id(layer)] = error
            return layer._infer()
        shapes.append(_shapes_at(network, which, prof, on_error, shape_values))
    opt = {name: tuple(s[1]) for name, s in prof.items()}
    opt.update((name, tuple(v[1])) for name, v in (shape_values or {}).items())
    for layer in _topological(network):
        error = failures[1].get(id(layer))
        if error is None or layer._TYPE == LayerType.SCALE:
            continue
        if layer._TYPE in (LayerType.SHUFFLE, LayerType.SLICE) or id(layer) not in failures[2]:
            raise NetworkError(f"optimization profile {k}, at its opt shapes {opt}: {error}")
    for layer in _topological(network):
        if layer._TYPE != LayerType.SCALE:
            continue
        lo, hi = (shapes[which][id(layer._inputs[0])] for which in (0, 2))
        p = layer._params
        count = max(w.size for w in (layer._weights[key] for key in ("shift", "scale", "power")))
        mode, axis = ScaleMode(p["mode"]), p["channel_axis"] % len(lo)
        if not count or mode == ScaleMode.UNIFORM:
            continue
        end = axis + 1 if mode == ScaleMode.CHANNEL else len(lo)
        vol_lo, vol_hi = (math.prod(s[axis:end]) for s in (lo, hi))
        if not vol_lo <= count <= vol_hi:
            raise NetworkError(f"layer '{layer.name}': {count} weights per coefficient, but optimization profile {k} "
                               f"gives the {mode.name} dims from channel_axis {axis} volumes {vol_lo}..{vol_hi}")
