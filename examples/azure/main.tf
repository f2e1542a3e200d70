# A virtual machine scale set for berth's Azure provider (provider =
# "azure"): the Uniform scale set, the network security group of its
# instances and a least-privilege custom role assigned to berth's identity
# on the set alone. berth sets the set's capacity itself; Terraform creates
# the set empty and then leaves that number alone.

terraform {
  required_version = ">= 1.3"
  required_providers {
    azurerm = {
      source  = "hashicorp/azurerm"
      version = ">= 3.80"
    }
  }
}

data "azurerm_subscription" "current" {}

data "azurerm_resource_group" "ci" {
  name = var.resource_group_name
}

locals {
  location = coalesce(var.location, data.azurerm_resource_group.ci.location)
  spot     = var.spot
}

# The instances accept SSH from berth only; outbound traffic stays open
# (jobs clone repositories, pull packages), as Azure's default rules allow.
resource "azurerm_network_security_group" "instances" {
  name                = "${var.name}-instances"
  location            = local.location
  resource_group_name = data.azurerm_resource_group.ci.name

  security_rule {
    name                       = "ssh-from-berth"
    priority                   = 100
    direction                  = "Inbound"
    access                     = "Allow"
    protocol                   = "Tcp"
    source_port_range          = "*"
    destination_port_range     = tostring(var.ssh_port)
    source_address_prefixes    = var.berth_cidr_blocks
    destination_address_prefix = "*"
  }

  lifecycle {
    precondition {
      condition     = length(var.berth_cidr_blocks) > 0
      error_message = "Set berth_cidr_blocks: berth must reach the instances over SSH."
    }
  }
}

resource "azurerm_linux_virtual_machine_scale_set" "ci" {
  name                = var.name
  location            = local.location
  resource_group_name = data.azurerm_resource_group.ci.name
  sku                 = var.vm_size
  instances           = 0 # berth owns the capacity
  admin_username      = var.admin_username
  zones               = var.zones

  # berth deletes instances itself (deleteInstances) and must be the only
  # one to: no overprovisioning, no automatic upgrades under running jobs,
  # and no autoscale settings on this set.
  overprovision          = false
  upgrade_mode           = "Manual"
  single_placement_group = false

  priority        = local.spot ? "Spot" : "Regular"
  eviction_policy = local.spot ? "Delete" : null # berth refuses Deallocate
  max_bid_price   = local.spot ? var.spot_max_price : null

  admin_ssh_key {
    username   = var.admin_username
    public_key = var.ssh_public_key
  }

  source_image_id = var.image_id
  dynamic "source_image_reference" {
    for_each = var.image_id == null ? [1] : []
    content {
      publisher = "Canonical"
      offer     = "ubuntu-24_04-lts"
      sku       = "server"
      version   = "latest"
    }
  }

  os_disk {
    caching              = "ReadWrite"
    storage_account_type = "Premium_LRS"
    disk_size_gb         = var.os_disk_size_gb
  }

  # Managed boot diagnostics: berth reads the host keys cloud-init prints
  # to the serial console through retrieveBootDiagnosticsData.
  boot_diagnostics {}

  # cloud-init prints the host keys to the console by default on Ubuntu
  # and Debian; say so anyway, so a changed image default is caught.
  custom_data = base64encode(<<-EOT
    #cloud-config
    ssh:
      emit_keys_to_console: true
    EOT
  )

  network_interface {
    name                      = "${var.name}-nic"
    primary                   = true
    network_security_group_id = azurerm_network_security_group.instances.id

    ip_configuration {
      name      = "${var.name}-ipconfig"
      primary   = true
      subnet_id = var.subnet_id

      dynamic "public_ip_address" {
        for_each = var.public_ip ? [1] : []
        content {
          name = "${var.name}-pip"
        }
      }
    }
  }

  lifecycle {
    ignore_changes = [instances]
  }
}

# The least-privilege role: what berth-provider-azure calls, on this scale
# set only. Reading the set and its instances (with instance views, network
# interfaces and public addresses), changing its capacity, deleting
# instances, reading the serial console log; deallocate and start only
# with suspend.
resource "azurerm_role_definition" "berth" {
  name        = "berth-${var.name}"
  scope       = azurerm_linux_virtual_machine_scale_set.ci.id
  description = "berth CI autoscaler on scale set ${var.name}"

  permissions {
    actions = concat([
      "Microsoft.Compute/virtualMachineScaleSets/read",
      "Microsoft.Compute/virtualMachineScaleSets/write",
      "Microsoft.Compute/virtualMachineScaleSets/delete/action",
      "Microsoft.Compute/virtualMachineScaleSets/virtualMachines/read",
      "Microsoft.Compute/virtualMachineScaleSets/virtualMachines/retrieveBootDiagnosticsData/action",
      "Microsoft.Compute/virtualMachineScaleSets/virtualMachines/networkInterfaces/read",
      "Microsoft.Compute/virtualMachineScaleSets/publicIPAddresses/read",
      ], var.suspend ? [
      "Microsoft.Compute/virtualMachineScaleSets/deallocate/action",
      "Microsoft.Compute/virtualMachineScaleSets/start/action",
    ] : [])
  }

  assignable_scopes = [azurerm_linux_virtual_machine_scale_set.ci.id]
}

resource "azurerm_role_assignment" "berth" {
  scope              = azurerm_linux_virtual_machine_scale_set.ci.id
  role_definition_id = azurerm_role_definition.berth.role_definition_resource_id
  principal_id       = var.berth_principal_id
}
