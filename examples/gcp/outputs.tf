output "service_account_email" {
  description = "berth's service account: run berth with its key (credentials_file) or as it (attached to berth's VM, or impersonated)."
  value       = google_service_account.berth.email
}

output "provider_config" {
  description = "The [autoscaler.provider_config] keys for this group; add connector.key_path and, if berth does not run as the service account, credentials_file."
  value = merge({
    name                = var.name
    project             = google_service_account.berth.project
    ssh_port            = var.ssh_port
    use_private_address = !var.external_ip
    suspend             = var.suspend
    connector           = { username = var.ssh_user }
  }, var.region != "" ? { region = var.region } : { zone = var.zone })
}
