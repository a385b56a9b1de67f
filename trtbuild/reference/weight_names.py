"""Weight names and refit marks of a network: INetworkDefinition.set_weights_name and mark_weights_refittable.

A refitter finds weights by name, so the names are what a refittable plan keeps. TensorRT associates a name with
*memory*, not with a layer: every use of Weights with the same values pointer, type and count takes the name.
The reference matches the same way, on the address of the array a Weights holds; note that Weights made from a
writable numpy array copy it (core.Weights), so name the Weights object the layer was given (or Weights of a
read-only array), not the numpy array it was made from.

What TensorRT-RTX 1.7 does, probed and mirrored (tests/reference/test_refit.py compares both):
- naming weights no layer uses logs an API usage error and returns False;
- a name already given to other weights logs an error and returns False;
- naming weights again renames them (True); None clears the name (True);
- mark_weights_refittable/unmark_weights_refittable of a name no weights have log an error and return False;
  are_weights_marked_refittable of such a name is False.
"""

from __future__ import annotations

from .core import Weights


def weights_key(w: Weights) -> tuple[int, int, int] | None:
    """(values address, count, type) of weights that have values; None for empty weights."""
    if w is None or not w.size:
        return None
    return int(w._array.__array_interface__["data"][0]), int(w.size), int(w.dtype)


class NetworkWeightNames:
    """The weight-name part of INetworkDefinition (a mixin: its state is created on first use)."""

    def _weight_name_state(self) -> tuple[dict, dict, set]:
        """({weights key: name}, {name: weights key}, marked names)."""
        if "_weight_names" not in self.__dict__:
            self._weight_names, self._named_weights, self._refit_marks = {}, {}, set()
        return self._weight_names, self._named_weights, self._refit_marks

    def _used_weights(self) -> dict[int, set[tuple[int, int]]]:
        """{values address: {(count, type)}} of every weights a layer of the network holds."""
        used: dict[int, set[tuple[int, int]]] = {}
        for layer in self._layers:
            for w in layer._weights.values():
                key = weights_key(w)
                if key is not None:
                    used.setdefault(key[0], set()).add(key[1:])
        return used

    def _weights_name(self, w: Weights) -> str | None:
        """The name set_weights_name gave these weights, or None."""
        key = weights_key(w)
        return None if key is None else self._weight_name_state()[0].get(key)

    def set_weights_name(self, weights: Weights, name: str | None) -> bool:
        names, by_name, marks = self._weight_name_state()
        if not isinstance(weights, Weights):
            weights = Weights(weights)
        key = weights_key(weights)
        used = self._used_weights()
        if key is None or key[1:] not in used.get(key[0], set()):
            if key is not None and key[0] in used:
                self._api_usage_error(f"INetworkDefinition::setWeightsName: Error Code 3: API Usage Error (weights "
                                      f"at this address are used with another type or count ({sorted(used[key[0]])}) "
                                      f"than the {key[1]} {weights.dtype.name} values given; the name "
                                      f"'{name}' is rejected)")
            else:
                self._api_usage_error("INetworkDefinition::setWeightsName: Error Code 3: API Usage Error (Parameter "
                                      f"check failed: the given weights is not used in the network; name '{name}'; "
                                      "Weights made from a writable numpy array hold a copy of it, so pass the "
                                      "Weights object the layer was given)")
            return False
        old = names.pop(key, None)
        if old is not None:
            by_name.pop(old, None)
        if name is None:
            marks.discard(old)
            return True
        name = str(name)
        if name in by_name and by_name[name] != key:
            if old is not None:  # the rename fails: the weights keep their old name
                names[key], by_name[old] = old, key
            self._api_usage_error(f"INetworkDefinition::setWeightsName: Error Code 3: API Usage Error (the same name "
                                  f"{name} has been used for different sets of weights)")
            return False
        if old in marks:
            marks.discard(old)
            marks.add(name)
        names[key], by_name[name] = name, key
        return True

    def _check_weights_name(self, name: str | None, api: str) -> bool:
        if name is None:  # TensorRT takes the null pointer and logs it
            self._api_usage_error(f"INetworkDefinition::{api}: Error Code 3: API Usage Error (Parameter check failed, "
                                  "condition: name != nullptr. name must not be a null pointer.)")
            return False
        if str(name) in self._weight_name_state()[1]:
            return True
        self._api_usage_error(f"INetworkDefinition::{api}: Error Code 3: API Usage Error (Parameter check failed: "
                              f"there are no weights named {name})")
        return False

    def mark_weights_refittable(self, name: str | None) -> bool:
        """Under BuilderFlag.REFIT_INDIVIDUAL, only marked weights are refittable (and stripped by STRIP_PLAN)."""
        if not self._check_weights_name(name, "markWeightsRefittable"):
            return False
        self._weight_name_state()[2].add(str(name))
        return True

    def unmark_weights_refittable(self, name: str | None) -> bool:
        if not self._check_weights_name(name, "unmarkWeightsRefittable"):
            return False
        self._weight_name_state()[2].discard(str(name))
        return True

    def are_weights_marked_refittable(self, name: str) -> bool:
        return str(name) in self._weight_name_state()[2]
