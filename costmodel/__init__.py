"""Cost models: price every operator on every device and every transfer on every link."""

from costmodel.base import CostModel, CostModelError

__all__ = ["CostModel", "CostModelError"]
