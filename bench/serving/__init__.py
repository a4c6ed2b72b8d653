"""One arena server and its models, measured from the caller's side (`python -m bench` runs the
numbered sections: overhead, ttft, panes, users, coldstart, memory, browser, engines).

    config.py context.py models.py   what a run measures, what the sections share, its models files
    paths.py server.py attach.py     the four paths a request travels, the real server, the engine alone
    gradio_path.py ui_client.py      the UI path, read as a browser reads it
    lease.py random_models.py step_probe.py   a short GPU lease: counts sized to it, models to fill it
    soak.py                          one server visited for a while, its memory sampled
"""
