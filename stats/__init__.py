"""Statistical audits of the pp3 selector (STATS.md): ticket fidelity, the 24-bit uniform, stream independence,
end-to-end frequencies, greedy rows, and the planted bugs that show each audit has power. Run ``python -m stats``.
"""
