"""How the figures of bench/ look (gnuplot), shared by run.py and mpi.py.

Labels as written: gnuplot's "enhanced" text would make every underscore a
subscript ("ucp_fadd" showed as "ucp" with "f" and "add" below it), so the
terminal is noenhanced. The legend goes in a band of its own under the plot,
in columns, and the canvas grows by that band: the data keeps the full width
and height it would have without a legend (a legend outside on the right took
half of each figure).
"""
import math


def header(out_path, entries, width=960, plot_height=560):
    """The first lines of a gnuplot script: terminal, output and legend."""
    columns = 1 if entries <= 3 else 2 if entries <= 10 else 3
    rows = math.ceil(entries / columns) if entries else 0
    height = plot_height + 18 * rows + 20
    return [f"set terminal pngcairo noenhanced size {width},{height} font ',11'",
            f"set output '{out_path}'",
            f"set key below center horizontal maxcols {columns} font ',10' samplen 2 width 2"]
