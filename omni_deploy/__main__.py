from omni_deploy.cli import run

run()
