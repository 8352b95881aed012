@_exported import TokenStore
