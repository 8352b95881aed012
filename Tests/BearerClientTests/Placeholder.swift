import Testing

// Placeholder: the bearer client tests land here.
