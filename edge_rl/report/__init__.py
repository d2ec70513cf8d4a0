"""Reports a person can look at: PNG plots and a markdown summary of runs.

    runs = [load_run(path) for path in run_dirs]  # summary.json + metrics.csv, typed
    written = write_report(runs, out_dir)        # PNGs for plots.PLOTS, then report.md

``runs`` reads a run directory (``costs``: its runtime breakdown and energy blocks),
``plots`` draws (one function per figure, listed in ``PLOTS``; what a run cost is drawn
by ``cost_plots``, on ``canvas``), ``markdown`` writes the summary tables, ``write`` saves
them. Host-side only: needs matplotlib (the ``host`` extra).
"""
