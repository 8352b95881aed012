// The OAuth 2 module is used together with the coordinator: importing it imports the core.
@_exported import AuthCoordinator
