output "scale_set_id" {
  description = "The scale set's resource ID, the scope of berth's role."
  value       = azurerm_linux_virtual_machine_scale_set.ci.id
}

output "role_definition_id" {
  description = "The custom role berth's identity holds on the scale set."
  value       = azurerm_role_definition.berth.role_definition_resource_id
}

output "berth_toml" {
  description = "The [autoscaler] part of berth.toml for this scale set."
  value       = <<-EOT
    [autoscaler]
    provider = "azure"
    max_instances = ${var.max_size}

    [autoscaler.provider_config]
    subscription_id = "${data.azurerm_subscription.current.subscription_id}"
    resource_group = "${data.azurerm_resource_group.ci.name}"
    name = "${azurerm_linux_virtual_machine_scale_set.ci.name}"
    max_size = ${var.max_size}
    ssh_port = ${var.ssh_port}
    suspend = ${var.suspend}
    use_private_address = ${!var.public_ip}

    [autoscaler.provider_config.connector]
    key_path = "/etc/berth/${var.name}.pem"
    EOT
}
