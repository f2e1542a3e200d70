variable "name" {
  description = "Name of the scale set (provider_config name)."
  type        = string
}

variable "resource_group_name" {
  description = "Existing resource group for the scale set and its security group."
  type        = string
}

variable "location" {
  description = "Region; default the resource group's."
  type        = string
  default     = null
}

variable "subnet_id" {
  description = "Subnet of the instances; berth must reach it on ssh_port."
  type        = string
}

variable "zones" {
  description = "Availability zones to spread instances over; empty for none."
  type        = list(string)
  default     = []
}

variable "vm_size" {
  description = "VM size of every instance (Arm64 sizes, with a p, need an Arm64 image)."
  type        = string
  default     = "Standard_D2s_v5"
}

variable "image_id" {
  description = "Your CI image (a gallery image version or managed image ID); null for stock Ubuntu 24.04."
  type        = string
  default     = null
}

variable "os_disk_size_gb" {
  description = "OS disk size; it is kept while berth keeps an instance suspended."
  type        = number
  default     = 64
}

variable "admin_username" {
  description = "The OS profile's admin user; berth logs in as it."
  type        = string
  default     = "azureuser"
}

variable "ssh_public_key" {
  description = "Public half of the key berth logs in with (its private half is connector.key_path)."
  type        = string
}

variable "ssh_port" {
  description = "Port sshd listens on in the image."
  type        = number
  default     = 22
}

variable "public_ip" {
  description = "Give each instance a public address (berth outside the virtual network; use_private_address = false)."
  type        = bool
  default     = false
}

variable "berth_cidr_blocks" {
  description = "Address ranges berth connects from."
  type        = list(string)
}

variable "berth_principal_id" {
  description = "Object ID of berth's identity: a managed identity, or a service principal's."
  type        = string
}

variable "max_size" {
  description = "max_size in provider_config: at least berth's max_instances."
  type        = number
  default     = 20
}

variable "suspend" {
  description = "Let berth suspend instances (deallocate, disk kept) and resume them (start)."
  type        = bool
  default     = false
}

variable "spot" {
  description = "Spot priority instances, evicted by deletion (berth replaces them)."
  type        = bool
  default     = false
}

variable "spot_max_price" {
  description = "Highest Spot price per hour; -1 pays up to the on-demand price."
  type        = number
  default     = -1
}
