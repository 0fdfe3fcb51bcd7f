"""The numpy array types the analysis shares, named once: ``F64`` float64, ``I64``
int64, ``I32`` int32, ``U8`` uint8, ``U64`` uint64, ``IntP`` intp (indices), ``B`` bool."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]
U8 = npt.NDArray[np.uint8]
U64 = npt.NDArray[np.uint64]
IntP = npt.NDArray[np.intp]
B = npt.NDArray[np.bool_]
