# softverbs as it reported itself before the port followed its link (4X EDR,
# 100 Gb/s, on any link): bench/mpi_hosts.py --configs "softverbs,softverbs 4X EDR"
active_width = 2
active_speed = 32
