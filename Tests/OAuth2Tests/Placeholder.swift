import Testing

// Placeholder: the OAuth 2 authorizer tests land here.
