"""The application: ``create_app`` (middleware, routes, the playground, the lifespan), the stores
the settings name, the artifact download route, and ``create_server`` for a folder of agents."""
