from omni_deploy.cli.app import run

run()
