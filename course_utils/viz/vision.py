"""How colours look with a colour-vision deficiency, and how far apart two colours are.

`simulate` applies the matrices of Machado, Oliveira and Fernandes (2009),
"A Physiologically-based Model for Simulation of Color Vision Deficiency",
at severity 1.0 (protanopia, deuteranopia, tritanopia), in linear sRGB.
`delta_e_2000` is the CIEDE2000 colour difference in CIELAB (D65 white), as
in Sharma, Wu and Dalal (2005), whose test pairs the tests check; `delta_e_76`
is the plain Euclidean distance in CIELAB. A difference under about 2 is
hard to see; the course's device colours stay at least 12 apart.
"""

from __future__ import annotations

import numpy as np

# Machado, Oliveira and Fernandes (2009), severity 1.0, applied to linear sRGB.
MACHADO_2009 = {
    "protanopia": np.array([[0.152286, 1.052583, -0.204868],
                            [0.114503, 0.786281, 0.099216],
                            [-0.003882, -0.048116, 1.051998]]),
    "deuteranopia": np.array([[0.367322, 0.860646, -0.227968],
                              [0.280085, 0.672501, 0.047413],
                              [-0.011820, 0.042940, 0.968881]]),
    "tritanopia": np.array([[1.255528, -0.076749, -0.178779],
                            [-0.078411, 0.930809, 0.147602],
                            [0.004733, 0.691367, 0.303900]]),
}
VISIONS = ("normal", *MACHADO_2009)
_SRGB_TO_XYZ = np.array([[0.4124564, 0.3575761, 0.1804375],
                         [0.2126729, 0.7151522, 0.0721750],
                         [0.0193339, 0.1191920, 0.9503041]])
_WHITE_D65 = np.array([0.95047, 1.0, 1.08883])


def to_linear(rgb) -> np.ndarray:
    """sRGB in [0, 1] -> linear light."""
    rgb = np.asarray(rgb, dtype=float)
    return np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)


def to_srgb(linear) -> np.ndarray:
    """Linear light -> sRGB in [0, 1] (clipped)."""
    linear = np.clip(np.asarray(linear, dtype=float), 0.0, 1.0)
    return np.where(linear <= 0.0031308, 12.92 * linear, 1.055 * linear ** (1 / 2.4) - 0.055)


def simulate(rgb, vision: str) -> np.ndarray:
    """The sRGB colours (..., 3) as seen with `vision`: one of `VISIONS`."""
    if vision not in VISIONS:
        raise ValueError(f"Unknown vision {vision!r}. Choose one of {VISIONS}.")
    rgb = np.asarray(rgb, dtype=float)[..., :3]
    if vision == "normal":
        return rgb
    return to_srgb(to_linear(rgb) @ MACHADO_2009[vision].T)


def to_lab(rgb) -> np.ndarray:
    """sRGB (..., 3) in [0, 1] -> CIELAB (L*, a*, b*), D65 white."""
    xyz = to_linear(np.asarray(rgb, dtype=float)[..., :3]) @ _SRGB_TO_XYZ.T / _WHITE_D65
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.stack([116 * f[..., 1] - 16, 500 * (f[..., 0] - f[..., 1]), 200 * (f[..., 1] - f[..., 2])], axis=-1)


def delta_e_76(lab1, lab2) -> np.ndarray:
    """CIE76 colour difference: the Euclidean distance in CIELAB."""
    return np.linalg.norm(np.asarray(lab1, float) - np.asarray(lab2, float), axis=-1)


def delta_e_2000(lab1, lab2) -> np.ndarray:
    """CIEDE2000 colour difference of CIELAB colours (..., 3), element-wise."""
    L1, a1, b1 = np.moveaxis(np.asarray(lab1, float), -1, 0)
    L2, a2, b2 = np.moveaxis(np.asarray(lab2, float), -1, 0)
    c_mean = (np.hypot(a1, b1) + np.hypot(a2, b2)) / 2
    g = 0.5 * (1 - np.sqrt(c_mean ** 7 / (c_mean ** 7 + 25.0 ** 7)))
    a1p, a2p = (1 + g) * a1, (1 + g) * a2
    c1p, c2p = np.hypot(a1p, b1), np.hypot(a2p, b2)
    h1p = np.degrees(np.arctan2(b1, a1p)) % 360
    h2p = np.degrees(np.arctan2(b2, a2p)) % 360
    dL, dC = L2 - L1, c2p - c1p
    dh = h2p - h1p
    dh = np.where(dh > 180, dh - 360, np.where(dh < -180, dh + 360, dh))
    dh = np.where(c1p * c2p == 0, 0.0, dh)
    dH = 2 * np.sqrt(c1p * c2p) * np.sin(np.radians(dh / 2))
    L_mean, c_mean_p = (L1 + L2) / 2, (c1p + c2p) / 2
    h_sum = h1p + h2p
    h_mean = np.where(np.abs(h1p - h2p) > 180, np.where(h_sum < 360, h_sum + 360, h_sum - 360), h_sum) / 2
    h_mean = np.where(c1p * c2p == 0, h_sum, h_mean)
    t = (1 - 0.17 * np.cos(np.radians(h_mean - 30)) + 0.24 * np.cos(np.radians(2 * h_mean))
         + 0.32 * np.cos(np.radians(3 * h_mean + 6)) - 0.20 * np.cos(np.radians(4 * h_mean - 63)))
    s_l = 1 + 0.015 * (L_mean - 50) ** 2 / np.sqrt(20 + (L_mean - 50) ** 2)
    s_c, s_h = 1 + 0.045 * c_mean_p, 1 + 0.015 * c_mean_p * t
    r_t = (-2 * np.sqrt(c_mean_p ** 7 / (c_mean_p ** 7 + 25.0 ** 7))
           * np.sin(np.radians(60 * np.exp(-(((h_mean - 275) / 25) ** 2)))))
    return np.sqrt((dL / s_l) ** 2 + (dC / s_c) ** 2 + (dH / s_h) ** 2 + r_t * (dC / s_c) * (dH / s_h))


def closest_pair(colors, vision: str = "normal", *, metric=delta_e_2000) -> tuple[float, tuple[int, int]]:
    """The smallest difference between any two of `colors` (sRGB, (n, 3)) seen with `vision`, and which pair."""
    lab = to_lab(simulate(np.asarray(colors, dtype=float)[:, :3], vision))
    i, j = np.triu_indices(len(lab), 1)
    distances = metric(lab[i], lab[j])
    k = int(np.argmin(distances))
    return float(distances[k]), (int(i[k]), int(j[k]))
