"""What each way of loading a checkpoint into a layout holds at its peak, on the fullest device, from shapes.

Three routes, as Keras 3.15 and keras-hub 0.32 take them (tests/serving/test_loading.py checks each mechanism on
a real load): `from_preset` reads a `.weights.h5` file and gives each variable its whole value
(`variable.assign`, which makes it a whole array on the default device before `device_put` splits it);
`model.load_weights(<Orbax folder>)` reads each device's blocks into new arrays while the built model still
holds its initial values; Orbax can read the blocks into the arrays a stateless serving step takes, from a
shape-only model (notebook 13 does).
"""

from __future__ import annotations

from dataclasses import dataclass

from course_utils.placements import per_device, planned_placement


@dataclass(frozen=True)
class LoadingPeaks:
    """Bytes the fullest device holds at the peak of each way to load a model into a layout.

    Attributes:
        blocks: Its blocks of every weight: what it holds once the load is over.
        largest: The largest weight, whole.
        largest_path: That weight's path.
    """

    blocks: int
    largest: int
    largest_path: str

    @property
    def whole_then_split(self) -> int:
        """`from_preset` (a `.weights.h5` file): the model is built under the layout (its blocks), then each
        weight is read whole and made a whole array on the default device before `device_put` splits it: that
        device holds its blocks and the largest weight whole at once."""
        return self.blocks + self.largest

    @property
    def blocks_into_a_built_model(self) -> int:
        """`model.load_weights(<Orbax folder>)`: each device reads only its blocks, but into new arrays while
        the built model still holds its initial values: its blocks twice."""
        return 2 * self.blocks

    @property
    def blocks_into_shape_only(self) -> int:
        """Orbax reading each device's blocks into the arrays a stateless serving step takes, the model shape-only
        (no initial values): its blocks once."""
        return self.blocks

    def rows(self) -> list[tuple[str, int]]:
        return [("whole, then split (from_preset, .weights.h5)", self.whole_then_split),
                ("blocks, into a built model (load_weights of an Orbax folder)", self.blocks_into_a_built_model),
                ("blocks, into shape-only weights (Orbax, stateless step)", self.blocks_into_shape_only)]


def loading_peaks(model, distribution) -> LoadingPeaks:
    """The peak bytes per device of three ways to load `model`'s weights under `distribution`, from shapes.

    Args:
        model: A Keras model, real or shape-only (`abstract_model`): its weights' paths, shapes and dtypes.
        distribution: The distribution that lays the weights out (Keras's `get_variable_layout`).
    """
    placements = [planned_placement(tuple(v.shape), distribution.get_variable_layout(v), dtype=v.dtype, name=v.path)
                  for v in model.weights]
    largest = max(placements, key=lambda p: p.total_bytes)
    return LoadingPeaks(max(per_device(placements).values()), largest.total_bytes, largest.name)
