/// Known bugs from this package's history that `authcoord simulate --fleet --plant` puts back,
/// to show that the fleet simulation catches them (a simulation that cannot fail proves
/// nothing). Package access only; nothing sets it but that command, before its first run, so
/// production code reads `nil`.
package enum PlantedBug: String, CaseIterable, Sendable {
  /// The seams issue's first break: a token request under the lease without rule 16's guard
  /// (`confirmLease` reads the store but neither renews the grant nor checks it).
  case retryWithoutConfirm = "retry-without-confirm"
  /// The pause stress's lost rotation: a holder whose hold was lost drops its save (and its
  /// save retries) even with a fenced store, leaving the spent refresh token stored.
  case dropRotationOnLostHold = "drop-rotation-on-lost-hold"

  /// The bug planted in this process, if any.
  nonisolated(unsafe) package static var planted: PlantedBug?
}
