import AuthCoordinator

/// What ``AlipayCallbackRouter/handle(_:)`` did with a URL, or
/// ``AlipayCallbackRouter/handleUniversalLink(_:)`` with a universal link.
public enum URLDisposition: Sendable, Hashable {
  /// An account-connect callback for the Inside SDK (the app's scheme, a host ending in the
  /// labels `inside.com`); it was passed to the router's account-connect hook.
  case accountConnect
  /// A `safepay` authorization result (or one in a universal link inside the router's
  /// ``UniversalLinkPrefix``); it was matched against the pending requests of the router's
  /// ``AlipayAuthCodeProvider``, then passed to the payment hook (the universal-link hook, for
  /// a universal link) too, when the router has one.
  case authResult(CallbackMatch)
  /// A `safepay` payment result, a `safepay` URL this library cannot read, or another URL whose
  /// host contains `safepay` (a lookalike host, another scheme), never read as an auth result;
  /// it was passed to the router's payment hook. For a universal link: a link inside the
  /// router's ``UniversalLinkPrefix`` that is no auth result; it was passed to the
  /// universal-link hook.
  case payment
  /// An Alipay URL that only a hook the router was created without would handle (an
  /// account-connect URL without the account-connect hook, a payment URL without the payment
  /// hook, a universal link inside the prefix without the universal-link hook): nothing was
  /// done, and the app should route it elsewhere.
  case unhandled
  /// Not an Alipay URL (for a universal link: outside the router's ``UniversalLinkPrefix``);
  /// the app should route it elsewhere.
  case notOurs

  /// Whether the URL was handled (the value to return from `application(_:open:options:)` when
  /// the app has no other handler): `false` for ``notOurs`` and ``unhandled``.
  public var isHandled: Bool { self != .notOurs && self != .unhandled }
}
