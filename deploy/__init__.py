"""Running the arena as several servers: configuration files and the scripts that use them.

Run each script from the checkout's root as a module (`python -m deploy.<name>`), so that it
imports this package and the app (`webui`) as any module does:

    render_nginx.py   deploy/nginx.conf.template rendered for an address and the servers behind it
    local_tier.py     the tier of compose.yaml as plain processes on one machine
    tier_drill.py     a crash drill (and a database outage) on a running local_tier
    compose.yaml compose/ signin/   Docker Compose's tier and the sign-in proxy's nginx file

docs/deploy.md says how each is used.
"""
